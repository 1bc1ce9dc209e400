//! Picks the board from the target, and puts its memory layout where cortex-m-rt's link.x finds it:
//! `thumbv6m-none-eabi` builds for the BBC micro:bit (nRF51822: Cortex-M0, 16 KiB of RAM), every
//! other target for the lm3s6965evb (Cortex-M3, 64 KiB of RAM). Both run in QEMU. The Cortex-M4F
//! build (`thumbv7em-none-eabihf`) takes the lm3s6965evb's layout and timer too, and runs in QEMU on
//! ARM's MPS2 AN386, whose memory holds that layout (see `.cargo/config.toml`). `cfg(board)` tells
//! `time` which timer ticks.
use std::{env, fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let (board, memory): (&str, &[u8]) = if target.starts_with("thumbv6m") {
        ("microbit", include_bytes!("memory-microbit.x"))
    } else {
        ("lm3s6965evb", include_bytes!("memory-lm3s6965evb.x"))
    };
    fs::write(out.join("memory.x"), memory).expect("OUT_DIR is writable");
    println!("cargo::rustc-check-cfg=cfg(board, values(\"lm3s6965evb\", \"microbit\"))");
    println!("cargo::rustc-cfg=board=\"{board}\"");
    println!("cargo::rustc-link-search={}", out.display());
    println!("cargo::rerun-if-changed=memory-lm3s6965evb.x");
    println!("cargo::rerun-if-changed=memory-microbit.x");
}
