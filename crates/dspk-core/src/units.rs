//! Sizes and counts written for people: `491.52 GB`, `18 446 744 073 709 551 615 samples`.
//!
//! Error messages that quote a size over a limit use these, so a log line can be read at a
//! glance instead of counted digit by digit.

/// `bytes` in decimal units with two decimals (`"491.52 GB"`, `"1.00 kB"`), or as a plain
/// number under 1000 (`"512 bytes"`). Units go up to EB, so every `u64` fits
/// (`u64::MAX` is `"18.45 EB"`).
#[must_use]
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["kB", "MB", "GB", "TB", "PB", "EB"];
    if bytes < 1000 {
        return format!("{bytes} {}", if bytes == 1 { "byte" } else { "bytes" });
    }
    // Integer arithmetic (in hundredths of the unit) so the printed digits are exact; the
    // unit is the first whose rounded value stays under 1000.
    let mut unit = 0;
    let mut scale: u128 = 1000;
    let mut hundredths = (u128::from(bytes) * 100 + scale / 2) / scale;
    while unit + 1 < UNITS.len() && hundredths >= 100_000 {
        unit += 1;
        scale *= 1000;
        hundredths = (u128::from(bytes) * 100 + scale / 2) / scale;
    }
    format!(
        "{}.{:02} {}",
        hundredths / 100,
        hundredths % 100,
        UNITS[unit]
    )
}

/// `count` with its digits in groups of three separated by spaces, then `unit`
/// (`format_count(30000, "samples")` is `"30 000 samples"`). For counts of things that are not
/// bytes, where a decimal prefix would hide the exact value.
#[must_use]
pub fn format_count(count: u64, unit: &str) -> String {
    let digits = count.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3 + unit.len() + 1);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(' ');
        }
        grouped.push(digit);
    }
    if !unit.is_empty() {
        grouped.push(' ');
        grouped.push_str(unit);
    }
    grouped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_in_decimal_units() {
        assert_eq!(format_bytes(0), "0 bytes");
        assert_eq!(format_bytes(1), "1 byte");
        assert_eq!(format_bytes(999), "999 bytes");
        assert_eq!(format_bytes(1000), "1.00 kB");
        assert_eq!(format_bytes(999_994), "999.99 kB");
        // Rounds to the nearest hundredth, carrying into the next unit.
        assert_eq!(format_bytes(999_995), "1.00 MB");
        assert_eq!(format_bytes(491_520_000_000), "491.52 GB");
        assert_eq!(format_bytes(512 << 20), "536.87 MB");
        assert_eq!(format_bytes(u64::MAX), "18.45 EB");
    }

    #[test]
    fn counts_grouped_by_thousands() {
        assert_eq!(format_count(0, "samples"), "0 samples");
        assert_eq!(format_count(999, "channels"), "999 channels");
        assert_eq!(format_count(30_000, "samples"), "30 000 samples");
        assert_eq!(format_count(1_234_567, ""), "1 234 567");
        assert_eq!(
            format_count(u64::MAX, "samples"),
            "18 446 744 073 709 551 615 samples"
        );
    }
}
