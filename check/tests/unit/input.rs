//! The tests of `src/input.rs`.

use locksim_check::input::*;
use std::path::Path;

fn lines(text: &[u8], max: usize) -> Vec<Line> {
    let mut reader = std::io::BufReader::with_capacity(4, text);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    loop {
        let line = read_line_bounded(&mut reader, &mut buf, max).unwrap();
        let stop = !matches!(line, Line::Complete(_));
        out.push(line);
        if stop {
            return out;
        }
    }
}

#[test]
fn lines_are_cut_at_the_bound() {
    use Line::*;
    assert_eq!(lines(b"ab\ncd\n", 3), [Complete(3), Complete(3), Last(0)]);
    assert_eq!(lines(b"ab\ncd", 3), [Complete(3), Last(2)]);
    // "abc\n" is 4 bytes: one over a bound of 3.
    assert_eq!(lines(b"abc\n", 3), [TooLong]);
    assert_eq!(lines(b"abcd", 3), [TooLong]);
    assert_eq!(lines(b"abc", 3), [Last(3)]);
    assert_eq!(lines(b"", 3), [Last(0)]);
}

#[test]
fn an_endless_file_costs_only_the_bound() {
    let mut reader = std::io::BufReader::new(std::io::repeat(b'x'));
    let mut buf = Vec::new();
    let line = read_line_bounded(&mut reader, &mut buf, 1000).unwrap();
    assert_eq!(line, Line::TooLong);
    assert_eq!(buf.len(), 1001);
}

#[test]
fn an_output_that_is_an_input_by_any_name_is_refused() {
    let dir = std::env::temp_dir().join(format!("locksim-same-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("s.toml");
    std::fs::write(&input, "x").unwrap();
    let other = dir.join("other.toml");
    std::fs::write(&other, "y").unwrap();
    let linked = dir.join("linked.toml");
    let _ = std::fs::remove_file(&linked);
    std::fs::hard_link(&input, &linked).unwrap();
    let dotted = dir.join(".").join("s.toml");
    for same in [&input, &dotted, &linked] {
        let e = check_not_an_input(same, &[&other, &input]).unwrap_err();
        assert!(e.contains("writing it would overwrite that input"), "{e}");
        assert!(e.contains(&input.display().to_string()), "{e}");
    }
    assert_eq!(check_not_an_input(&other, &[&input]), Ok(()));
    assert_eq!(check_not_an_input(&dir.join("new.toml"), &[&input]), Ok(()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn output_paths() {
    let dir = std::env::temp_dir();
    assert!(check_output_file(Path::new("/dev/full"))
        .unwrap_err()
        .contains("not a regular file"));
    assert!(check_output_file(&dir)
        .unwrap_err()
        .contains("is a directory"));
    let missing = dir.join("locksim-no-such-dir-7f3a").join("r.jsonl");
    assert!(check_output_file(&missing)
        .unwrap_err()
        .contains("does not exist"));
    assert_eq!(
        check_output_file(&dir.join("locksim-new-file-7f3a.jsonl")),
        Ok(())
    );
    assert_eq!(check_output_dir(&dir), Ok(()));
    assert!(check_output_dir(Path::new("/dev/null"))
        .unwrap_err()
        .contains("not a directory"));
    let big = read_to_string_bounded(Path::new("/dev/zero"), 10).unwrap_err();
    assert!(big.contains("larger than 10 bytes"), "{big}");
    assert!(read_to_string_bounded(&dir, 10)
        .unwrap_err()
        .contains("directory"));
}
