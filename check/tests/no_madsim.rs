//! `locksim-check` is for any project's test suite: it must build without madsim and
//! without `--cfg madsim` (which `.cargo/config.toml` passes to every crate of this
//! workspace). This builds it once with the flag cleared, in a target directory of its own.

use std::process::Command;

fn cargo() -> Command {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

#[test]
fn builds_without_cfg_madsim() {
    let target_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-madsim");
    let out = cargo()
        .args([
            "check",
            "--release",
            "--offline",
            "-p",
            "locksim-check",
            "--lib",
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        // An empty RUSTFLAGS replaces `build.rustflags`: no `--cfg madsim`.
        .env("RUSTFLAGS", "")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo check failed:\n{stderr}");
}

#[test]
fn depends_on_no_simulator() {
    let out = cargo()
        .args(["tree", "--offline", "-p", "locksim-check", "-e", "normal"])
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.starts_with("locksim-check"), "{tree}");
    for banned in ["madsim", "locksim-sim", "tokio"] {
        assert!(
            !tree.contains(banned),
            "locksim-check depends on {banned}:\n{tree}"
        );
    }
}
