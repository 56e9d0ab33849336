//! Builds the clock shim (`shim/shim.c`) into a shared library that the binary carries
//! (`deploy::shim::SHIM`) and writes into a run's directory when a server's clock moves.

fn main() {
    let source = "shim/shim.c";
    println!("cargo:rerun-if-changed={source}");
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let library = out.join("locksim-shim.so");
    let compiler = cc::Build::new().get_compiler();
    let status = compiler
        .to_command()
        .args([
            "-O2", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-o",
        ])
        .arg(&library)
        .arg(source)
        .status()
        .expect("a C compiler runs (cargo's linker is one)");
    assert!(status.success(), "{source} does not compile: {status}");
}
