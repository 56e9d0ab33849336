//! The tests of `src/renamed.rs`.

use locksim_scenarios::renamed::*;

#[test]
fn every_renamed_key_is_refused_with_its_new_name() {
    for (old, new, _) in RENAMED {
        let (table, key) = old.split_once('.').unwrap();
        let text = format!("[{table}]\n{key} = 1\n");
        let e = check(&toml::from_str(&text).unwrap()).unwrap_err();
        assert_eq!(e.0, *old);
        assert!(e.1.starts_with(&format!("{old} is now {new} (")), "{e:?}");
    }
    let same_name_elsewhere = "[network]\nloss_probability = 0.1\ncheck_validity = 1\n";
    assert!(check(&toml::from_str(same_name_elsewhere).unwrap()).is_ok());
}
