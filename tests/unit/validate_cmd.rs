//! The tests of `src/validate_cmd.rs`.

use clap::Parser;
use locksim::validate_cmd::*;
use locksim_protocols::Registry;
use std::path::PathBuf;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: ValidateArgs,
}

/// A directory of scenario files, removed when dropped.
struct Set(PathBuf);

impl Drop for Set {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn set_of(files: &[(&str, bool)]) -> Set {
    let dir = std::env::temp_dir().join(format!("locksim-set-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, default) in files {
        let marked = if *default {
            "[validation]\ndefault_set = true\n"
        } else {
            ""
        };
        let text = format!(
            "name = \"{name}\"\nduration_ms = 1000\n[protocol]\nname = \"single-redis\"\n{marked}"
        );
        std::fs::write(dir.join(format!("{name}.toml")), text).unwrap();
    }
    Set(dir)
}

fn chosen(set: &Set, flags: &[&str]) -> Vec<String> {
    let dir = set.0.display().to_string();
    let argv = [&["validate", "--set", &dir][..], flags].concat();
    let args = Cli::try_parse_from(argv).unwrap().args;
    let set = load_set(&args, &Registry::builtin()).unwrap();
    set.into_iter().map(|(e, _)| e.name).collect()
}

/// Without `--full` or `--only`, the files marked `default_set`; with `--full`, all; a
/// set that marks none runs whole.
#[test]
fn the_default_set_is_the_marked_files_and_full_is_all() {
    let set = set_of(&[("a", true), ("b", false), ("c", true)]);
    assert_eq!(chosen(&set, &[]), ["a", "c"]);
    assert_eq!(chosen(&set, &["--full"]), ["a", "b", "c"]);
    assert_eq!(chosen(&set, &["--only", "b"]), ["b"]);
    drop(set);
    let unmarked = set_of(&[("a", false), ("b", false)]);
    assert_eq!(chosen(&unmarked, &[]), ["a", "b"]);
}
