//! A 5 x 7 bitmap font of our own: digits, upper-case letters and the symbols that axis labels
//! and titles use. Lower-case letters draw as their capitals; any other character draws as `?`.

/// Glyph width in pixels.
pub(super) const WIDTH: usize = 5;
/// Glyph height in pixels.
pub(super) const HEIGHT: usize = 7;
/// Horizontal distance from one glyph's left edge to the next one's, in pixels.
pub(super) const ADVANCE: usize = WIDTH + 1;

/// Every glyph the font has: seven rows of five columns, top row first, `#` for ink.
pub(super) const GLYPHS: &[(char, [&str; HEIGHT])] = &[
    (
        '0',
        [
            " ### ", "#   #", "#  ##", "# # #", "##  #", "#   #", " ### ",
        ],
    ),
    (
        '1',
        [
            "  #  ", " ##  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### ",
        ],
    ),
    (
        '2',
        [
            " ### ", "#   #", "    #", "   # ", "  #  ", " #   ", "#####",
        ],
    ),
    (
        '3',
        [
            "#####", "   # ", "  #  ", "   # ", "    #", "#   #", " ### ",
        ],
    ),
    (
        '4',
        [
            "   # ", "  ## ", " # # ", "#  # ", "#####", "   # ", "   # ",
        ],
    ),
    (
        '5',
        [
            "#####", "#    ", "#### ", "    #", "    #", "#   #", " ### ",
        ],
    ),
    (
        '6',
        [
            "  ## ", " #   ", "#    ", "#### ", "#   #", "#   #", " ### ",
        ],
    ),
    (
        '7',
        [
            "#####", "    #", "   # ", "  #  ", " #   ", " #   ", " #   ",
        ],
    ),
    (
        '8',
        [
            " ### ", "#   #", "#   #", " ### ", "#   #", "#   #", " ### ",
        ],
    ),
    (
        '9',
        [
            " ### ", "#   #", "#   #", " ####", "    #", "   # ", " ##  ",
        ],
    ),
    (
        'A',
        [
            " ### ", "#   #", "#   #", "#####", "#   #", "#   #", "#   #",
        ],
    ),
    (
        'B',
        [
            "#### ", "#   #", "#   #", "#### ", "#   #", "#   #", "#### ",
        ],
    ),
    (
        'C',
        [
            " ### ", "#   #", "#    ", "#    ", "#    ", "#   #", " ### ",
        ],
    ),
    (
        'D',
        [
            "###  ", "#  # ", "#   #", "#   #", "#   #", "#  # ", "###  ",
        ],
    ),
    (
        'E',
        [
            "#####", "#    ", "#    ", "#### ", "#    ", "#    ", "#####",
        ],
    ),
    (
        'F',
        [
            "#####", "#    ", "#    ", "#### ", "#    ", "#    ", "#    ",
        ],
    ),
    (
        'G',
        [
            " ### ", "#   #", "#    ", "# ###", "#   #", "#   #", " ####",
        ],
    ),
    (
        'H',
        [
            "#   #", "#   #", "#   #", "#####", "#   #", "#   #", "#   #",
        ],
    ),
    (
        'I',
        [
            " ### ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### ",
        ],
    ),
    (
        'J',
        [
            "  ###", "   # ", "   # ", "   # ", "   # ", "#  # ", " ##  ",
        ],
    ),
    (
        'K',
        [
            "#   #", "#  # ", "# #  ", "##   ", "# #  ", "#  # ", "#   #",
        ],
    ),
    (
        'L',
        [
            "#    ", "#    ", "#    ", "#    ", "#    ", "#    ", "#####",
        ],
    ),
    (
        'M',
        [
            "#   #", "## ##", "# # #", "# # #", "#   #", "#   #", "#   #",
        ],
    ),
    (
        'N',
        [
            "#   #", "#   #", "##  #", "# # #", "#  ##", "#   #", "#   #",
        ],
    ),
    (
        'O',
        [
            " ### ", "#   #", "#   #", "#   #", "#   #", "#   #", " ### ",
        ],
    ),
    (
        'P',
        [
            "#### ", "#   #", "#   #", "#### ", "#    ", "#    ", "#    ",
        ],
    ),
    (
        'Q',
        [
            " ### ", "#   #", "#   #", "#   #", "# # #", "#  # ", " ## #",
        ],
    ),
    (
        'R',
        [
            "#### ", "#   #", "#   #", "#### ", "# #  ", "#  # ", "#   #",
        ],
    ),
    (
        'S',
        [
            " ####", "#    ", "#    ", " ### ", "    #", "    #", "#### ",
        ],
    ),
    (
        'T',
        [
            "#####", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ",
        ],
    ),
    (
        'U',
        [
            "#   #", "#   #", "#   #", "#   #", "#   #", "#   #", " ### ",
        ],
    ),
    (
        'V',
        [
            "#   #", "#   #", "#   #", "#   #", "#   #", " # # ", "  #  ",
        ],
    ),
    (
        'W',
        [
            "#   #", "#   #", "#   #", "# # #", "# # #", "# # #", " # # ",
        ],
    ),
    (
        'X',
        [
            "#   #", "#   #", " # # ", "  #  ", " # # ", "#   #", "#   #",
        ],
    ),
    (
        'Y',
        [
            "#   #", "#   #", " # # ", "  #  ", "  #  ", "  #  ", "  #  ",
        ],
    ),
    (
        'Z',
        [
            "#####", "    #", "   # ", "  #  ", " #   ", "#    ", "#####",
        ],
    ),
    (
        ' ',
        [
            "     ", "     ", "     ", "     ", "     ", "     ", "     ",
        ],
    ),
    (
        '.',
        [
            "     ", "     ", "     ", "     ", "     ", " ##  ", " ##  ",
        ],
    ),
    (
        ',',
        [
            "     ", "     ", "     ", "     ", " ##  ", "  #  ", " #   ",
        ],
    ),
    (
        '-',
        [
            "     ", "     ", "     ", "#####", "     ", "     ", "     ",
        ],
    ),
    (
        '+',
        [
            "     ", "  #  ", "  #  ", "#####", "  #  ", "  #  ", "     ",
        ],
    ),
    (
        ':',
        [
            "     ", " ##  ", " ##  ", "     ", " ##  ", " ##  ", "     ",
        ],
    ),
    (
        '/',
        [
            "     ", "    #", "   # ", "  #  ", " #   ", "#    ", "     ",
        ],
    ),
    (
        '(',
        [
            "   # ", "  #  ", " #   ", " #   ", " #   ", "  #  ", "   # ",
        ],
    ),
    (
        ')',
        [
            " #   ", "  #  ", "   # ", "   # ", "   # ", "  #  ", " #   ",
        ],
    ),
    (
        '%',
        [
            "##   ", "##  #", "   # ", "  #  ", " #   ", "#  ##", "   ##",
        ],
    ),
    (
        '=',
        [
            "     ", "     ", "#####", "     ", "#####", "     ", "     ",
        ],
    ),
    (
        '_',
        [
            "     ", "     ", "     ", "     ", "     ", "     ", "#####",
        ],
    ),
    (
        '#',
        [
            " # # ", " # # ", "#####", " # # ", "#####", " # # ", " # # ",
        ],
    ),
    ('?', UNKNOWN),
];

/// `?`, drawn for characters the font lacks.
const UNKNOWN: [&str; HEIGHT] = [
    " ### ", "#   #", "    #", "   # ", "  #  ", "     ", "  #  ",
];

/// The rows of the glyph that draws `c`: its own, its capital's for a lower-case letter, `?`'s
/// for a character the font lacks.
pub(super) fn glyph(c: char) -> &'static [&'static str; HEIGHT] {
    let c = c.to_ascii_uppercase();
    GLYPHS
        .iter()
        .find(|(g, _)| *g == c)
        .map_or(&UNKNOWN, |(_, rows)| rows)
}

/// Width in pixels of `text` drawn at `scale` (no trailing gap).
pub(super) fn text_width(text: &str, scale: usize) -> usize {
    let n = text.chars().count();
    (n * ADVANCE).saturating_sub(1) * scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glyphs_are_five_by_seven_distinct_and_inked() {
        for (i, (c, rows)) in GLYPHS.iter().enumerate() {
            for row in rows {
                assert_eq!(row.chars().count(), WIDTH, "glyph {c:?} row {row:?}");
                assert!(row.chars().all(|p| p == '#' || p == ' '), "glyph {c:?}");
            }
            let ink = rows
                .iter()
                .flat_map(|r| r.chars())
                .filter(|&p| p == '#')
                .count();
            assert_eq!(ink == 0, *c == ' ', "glyph {c:?} has {ink} ink pixels");
            for (d, other) in &GLYPHS[..i] {
                assert_ne!(d, c, "glyph {c:?} defined twice");
                assert_ne!(other, rows, "glyphs {d:?} and {c:?} are the same picture");
            }
        }
    }

    #[test]
    fn lookup_folds_case_and_falls_back_to_question_mark() {
        assert_eq!(glyph('a'), glyph('A'));
        assert_eq!(glyph('z'), glyph('Z'));
        assert_eq!(glyph('µ'), glyph('?'));
        assert_ne!(glyph('7'), glyph('?'));
        assert_eq!(text_width("", 2), 0);
        assert_eq!(text_width("AB", 2), 22);
    }
}
