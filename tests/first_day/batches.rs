//! `data::Batches`, the `DataLoader(shuffle=True)` analogue: every row once per epoch, rows of
//! all tensors aligned, a new order each epoch, the same sequence after the same seed.

use super::{here, panic_message};
use janus::data::Batches;
use janus::prelude::*;

/// `x` rows `[10i, 10i + 1]` and labels `i`, so a batch's alignment can be read off.
fn dataset(n: usize) -> (Tensor, Tensor) {
    let x = Tensor::from_vec(
        (0..n).flat_map(|i| [10.0 * i as f32, 10.0 * i as f32 + 1.0]).collect::<Vec<_>>(),
        [n, 2],
    );
    (x, Tensor::from_vec((0..n as i64).collect::<Vec<_>>(), [n]))
}

/// The labels of each batch, checking that `x` is aligned with them.
fn epoch(batches: Batches) -> Vec<Vec<i64>> {
    batches
        .map(|b| {
            assert_eq!(b.len(), 2);
            let (xs, ys) = (b[0].to_vec::<f32>(), b[1].to_vec::<i64>());
            assert_eq!(b[0].dims(), &[ys.len(), 2]);
            for (k, y) in ys.iter().enumerate() {
                assert_eq!((xs[2 * k], xs[2 * k + 1]), (10.0 * *y as f32, 10.0 * *y as f32 + 1.0), "row {k}");
            }
            ys
        })
        .collect()
}

#[test]
fn sequential_batches_keep_the_order() {
    let (x, y) = dataset(7);
    let b = Batches::new(&[x.clone(), y.clone()], 3);
    assert_eq!(b.len(), 3);
    assert_eq!(epoch(b), vec![vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
    assert_eq!(epoch(Batches::new(&[x, y], 3).drop_last()), vec![vec![0, 1, 2], vec![3, 4, 5]]);
}

#[test]
fn shuffled_batches_cover_every_row_once_in_a_new_order_each_epoch() {
    let (x, y) = dataset(23);
    janus::manual_seed(11);
    let first = epoch(Batches::shuffled(&[x.clone(), y.clone()], 5));
    let second = epoch(Batches::shuffled(&[x.clone(), y.clone()], 5));
    for e in [&first, &second] {
        assert_eq!(e.iter().map(Vec::len).collect::<Vec<_>>(), vec![5, 5, 5, 5, 3]);
        let mut all: Vec<i64> = e.concat();
        all.sort();
        assert_eq!(all, (0..23).collect::<Vec<_>>());
    }
    assert_ne!(first, second, "two epochs in the same order");
    assert_ne!(first.concat(), (0..23).collect::<Vec<_>>(), "not shuffled");
    // The same seed replays the same epochs.
    janus::manual_seed(11);
    assert_eq!(epoch(Batches::shuffled(&[x.clone(), y.clone()], 5)), first);
    assert_eq!(epoch(Batches::shuffled(&[x.clone(), y.clone()], 5)), second);
    // drop_last leaves out the short batch.
    let dropped = Batches::shuffled(&[x, y], 5).drop_last();
    assert_eq!(dropped.len(), 4);
    assert!(epoch(dropped).iter().all(|b| b.len() == 5));
}

#[test]
fn mismatched_rows_are_rejected_with_the_shapes() {
    let (x, _) = dataset(4);
    let y = Tensor::zeros([5]);
    let (msg, line) = (panic_message(|| drop(Batches::shuffled(&[x.clone(), y.clone()], 2))), line!());
    assert!(
        msg.contains("janus::batches")
            && msg.contains("[4, 2]")
            && msg.contains("[5]")
            && msg.contains(&here(file!(), line)),
        "{msg}"
    );
    let msg = panic_message(|| drop(Batches::new(std::slice::from_ref(&x), 0)));
    assert!(msg.contains("batch size 0"), "{msg}");
}
