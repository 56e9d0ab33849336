//! Compiles the catalog (`catalog/*.toml`) into the crate, so `locksim compare` can show it
//! from any directory: every file there is included, new ones without a code change.

use std::fmt::Write;

fn main() {
    let dir = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("catalog");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("scenarios/catalog exists")
        .map(|e| e.expect("a readable catalog entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut out = String::from("&[\n");
    for path in files {
        println!("cargo:rerun-if-changed={}", path.display());
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let _ = writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        );
    }
    out.push(']');
    let target = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("catalog.rs");
    std::fs::write(target, out).expect("OUT_DIR is writable");
}
