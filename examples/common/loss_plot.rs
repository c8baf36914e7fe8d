//! The language-model examples' loss curve: training loss (smoothed) and held-out points.

use plotters::prelude::*;

/// Writes the curve of per-step `losses` and held-out `(step, loss)` points to a PNG at `path`.
pub fn plot(
    path: &str,
    title: &str,
    losses: &[f32],
    val: &[(usize, f32)],
) -> Result<(), Box<dyn std::error::Error>> {
    plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| "cannot load the DejaVu font")?;
    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let hi = losses.iter().copied().fold(0.0f32, f32::max) * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0..losses.len(), 0f32..hi)?;
    chart.configure_mesh().x_desc("step").y_desc("loss (nats)").draw()?;
    // Exponential moving average, so the curve is readable through the batch noise.
    let mut ema = losses[0];
    let smooth = losses.iter().enumerate().map(|(i, &l)| {
        ema = 0.95 * ema + 0.05 * l;
        (i, ema)
    });
    chart
        .draw_series(LineSeries::new(smooth, &BLUE))?
        .label("training (EMA 0.95)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLUE));
    chart
        .draw_series(val.iter().map(|&p| Circle::new(p, 5, RED.filled())))?
        .label("held-out")
        .legend(|(x, y)| Circle::new((x + 9, y), 5, RED.filled()));
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE).draw()?;
    root.present()?;
    Ok(())
}
