//! Sorter settings from the command line: a preset (`--preset NAME`) and Kilosort4's own
//! setting names (`--set KEY=VALUE`, repeatable), as `dspk sort` and the sort examples read
//! them.

use dspk::kilosort::KilosortSettings;

/// `KEY=VALUE` split at the first `=`, each side trimmed.
///
/// # Errors
///
/// A usage message when there is no `=` or the key is empty.
pub fn parse_set(pair: &str) -> Result<(String, String), String> {
    match pair.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(format!(
            "--set {pair}: expected KEY=VALUE (e.g. --set Th_learned=7); `dspk sort --help` \
             lists the keys"
        )),
    }
}

/// The preset's settings (Kilosort4's defaults without one) with every `--set` pair applied
/// in order.
///
/// # Errors
///
/// A usage message naming an unknown preset, or the pair that is refused (an unknown key, a
/// value of the wrong type or out of range) and why.
pub fn settings(
    preset: Option<&str>,
    sets: &[(String, String)],
) -> Result<KilosortSettings, String> {
    let mut settings = match preset {
        Some(name) => {
            KilosortSettings::preset(name).map_err(|e| format!("--preset {name}: {e}"))?
        }
        None => KilosortSettings::default(),
    };
    for (key, value) in sets {
        settings
            .set(key, value)
            .map_err(|e| format!("--set {key}={value}: {e}"))?;
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_applied_in_order_and_refused_with_the_pair() {
        let set = |line: &str| {
            settings(
                None,
                &line
                    .split_whitespace()
                    .map(|p| parse_set(p).unwrap())
                    .collect::<Vec<_>>(),
            )
        };
        let s = set("Th_learned=7 nblocks=0 nblocks=5").unwrap();
        assert_eq!((s.th_learned, s.nblocks), (7.0, 5));
        let error = set("Th_learnd=7").unwrap_err();
        assert!(error.starts_with("--set Th_learnd=7: "), "{error}");
        assert!(error.contains("unknown setting"), "{error}");
        let emg = settings(Some("emusort"), &[("notch_hz".into(), "50".into())]).unwrap();
        assert_eq!((emg.nskip, emg.notch_hz), (2, Some(50.0)));
        let error = settings(Some("emu"), &[]).unwrap_err();
        assert!(error.starts_with("--preset emu: "), "{error}");
        assert_eq!(parse_set(" a = 1 "), Ok(("a".into(), "1".into())));
        for bad in ["nblocks", "=5"] {
            let error = parse_set(bad).unwrap_err();
            assert!(error.contains("expected KEY=VALUE"), "{error}");
        }
    }
}
