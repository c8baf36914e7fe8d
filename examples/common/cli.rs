//! The command-line pieces every example shares, for `clap`'s derive (`#[command(flatten)]`),
//! and how an example stops on bad input.

use janus::prelude::*;

/// `--device`, which every example takes.
#[derive(clap::Args, Debug)]
pub struct DeviceArg {
    /// Where tensors live: cpu, cuda, cuda:N or best (CUDA when a GPU is present, else CPU).
    #[arg(long = "device", default_value = "cpu", value_name = "DEVICE")]
    device: Device,
}

impl DeviceArg {
    /// The device, which must be available on this machine (else the example exits).
    pub fn device(&self) -> Device {
        if !self.device.is_available() {
            fail(&format!("device `{}` is not available: {}", self.device, janus::cuda::info()));
        }
        self.device
    }
}

/// Prints `msg` and exits with status 2, as `clap` does on bad flags.
pub fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(2)
}
