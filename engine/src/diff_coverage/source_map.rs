//! What diff coverage needs of a Source Map v3 (`mappings`, base64 VLQ): where each line of the
//! original source first lands in the generated file. A TypeScript file runs as the JavaScript
//! its types erase to, and V8 counts offsets of that JavaScript; the erasure's inline map leads
//! a changed TypeScript line to the first generated place mapped to it, whose V8 range then
//! says whether it ran. A line the map never names (a type, an interface) holds no code that
//! runs. The map is the guest's: every number is checked, and a bad one refuses the map.

use std::collections::BTreeMap;

/// A place in the generated file: its line (0-based) and column (UTF-16 code units).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generated {
    /// The generated line, 0-based.
    pub line: u32,
    /// The column in that line.
    pub column: u32,
}

/// Why a map's `mappings` cannot be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum MappingsError {
    /// A character outside base64's alphabet.
    #[error("{0:?} is not a base64 digit")]
    NotBase64(char),
    /// A number's last digit says more follow, and none do.
    #[error("a number runs past the end of its segment")]
    Unterminated,
    /// A number wider than 32 bits.
    #[error("a number is wider than 32 bits")]
    TooWide,
    /// A segment of a field count the format does not have.
    #[error("a segment has {0} fields, where the format has 1, 4 or 5")]
    Fields(usize),
    /// A column, source or line that adds up to below zero or past 32 bits.
    #[error("a segment points outside any line or source")]
    OutOfRange,
}

/// For each line (0-based) of the map's first source, the first generated place mapped to it,
/// in the generated file's order. Segments of other sources are read and passed over.
pub fn first_places(mappings: &str) -> Result<BTreeMap<u32, Generated>, MappingsError> {
    let mut firsts = BTreeMap::new();
    let (mut source, mut source_line, mut source_column, mut name) = (0i64, 0i64, 0i64, 0i64);
    let mut fields = Vec::with_capacity(5);
    for (line, segments) in mappings.split(';').enumerate() {
        let line = u32::try_from(line).map_err(|_| MappingsError::OutOfRange)?;
        let mut column = 0i64;
        for segment in segments.split(',').filter(|s| !s.is_empty()) {
            decode(segment, &mut fields)?;
            column = in_range(column + fields[0])?;
            match fields.len() {
                1 => continue,
                4 | 5 => {}
                n => return Err(MappingsError::Fields(n)),
            }
            source = in_range(source + fields[1])?;
            source_line = in_range(source_line + fields[2])?;
            source_column = in_range(source_column + fields[3])?;
            if let Some(&delta) = fields.get(4) {
                name = in_range(name + delta)?;
            }
            if source == 0 {
                firsts.entry(source_line as u32).or_insert(Generated {
                    line,
                    column: column as u32,
                });
            }
        }
    }
    Ok(firsts)
}

/// `value` when it is a place a 32-bit line or column can hold.
fn in_range(value: i64) -> Result<i64, MappingsError> {
    if (0..=i64::from(u32::MAX)).contains(&value) {
        Ok(value)
    } else {
        Err(MappingsError::OutOfRange)
    }
}

/// The numbers of one segment into `fields`: base64 digits of five bits each, least
/// significant first, the sixth bit saying another digit follows; the lowest bit of a
/// number is its sign.
fn decode(segment: &str, fields: &mut Vec<i64>) -> Result<(), MappingsError> {
    fields.clear();
    let (mut value, mut shift) = (0i64, 0u32);
    for c in segment.chars() {
        let digit = base64(c).ok_or(MappingsError::NotBase64(c))?;
        if shift > 30 {
            return Err(MappingsError::TooWide);
        }
        value |= (digit & 31) << shift;
        if digit & 32 != 0 {
            shift += 5;
            continue;
        }
        let magnitude = value >> 1;
        fields.push(if value & 1 == 1 {
            -magnitude
        } else {
            magnitude
        });
        (value, shift) = (0, 0);
    }
    if shift != 0 {
        return Err(MappingsError::Unterminated);
    }
    Ok(())
}

/// A base64 digit's value.
fn base64(c: char) -> Option<i64> {
    let value = match c {
        'A'..='Z' => c as u32 - 'A' as u32,
        'a'..='z' => c as u32 - 'a' as u32 + 26,
        '0'..='9' => c as u32 - '0' as u32 + 52,
        '+' => 62,
        '/' => 63,
        _ => return None,
    };
    Some(i64::from(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TypeScript 4.8's map of `pager.ts`: an interface on line 1, then a function whose
    /// lines 2 to 8 land on generated lines 3 to 9.
    const PAGER: &str = ";;;AACA,SAAgB,SAAS,CAAC,KAAa,EAAE,IAAY;IACnD,MAAM,IAAI,GAAW,IAAI,CAAC,KAAK,CAAC,KAAK,GAAG,IAAI,CAAC,CAAC;IAC9C,IAAI,KAAK,GAAG,IAAI,GAAG,CAAC,EAAE;QACpB,OAAO,IAAI,GAAG,CAAC,CAAC;KACjB;IACD,OAAO,IAAI,CAAC;AACd,CAAC;AAND,8BAMC";

    #[test]
    fn each_source_line_leads_to_its_first_generated_place() {
        let firsts = first_places(PAGER).expect("a compiler's map");
        let place = |line: u32| firsts.get(&line).map(|g| (g.line, g.column));
        assert_eq!(place(0), None, "the interface erases to nothing");
        assert_eq!(place(1), Some((3, 0)), "`export function` is `function`");
        assert_eq!(place(2), Some((4, 4)));
        assert_eq!(place(4), Some((6, 8)), "the return inside the if");
        assert_eq!(place(7), Some((9, 0)), "the closing brace");
        assert_eq!(firsts.len(), 7);
    }

    #[test]
    fn a_hostile_map_is_refused_with_why() {
        assert_eq!(first_places("AA!A"), Err(MappingsError::NotBase64('!')));
        assert_eq!(first_places("AAAg"), Err(MappingsError::Unterminated));
        assert_eq!(first_places("gggggggA"), Err(MappingsError::TooWide));
        assert_eq!(first_places("AA"), Err(MappingsError::Fields(2)));
        assert_eq!(first_places("AAAAAA"), Err(MappingsError::Fields(6)));
        // A source line below zero, and a column below zero.
        assert_eq!(first_places("AADA"), Err(MappingsError::OutOfRange));
        assert_eq!(first_places("D"), Err(MappingsError::OutOfRange));
        // Other sources' segments are read, and only the first source's kept.
        let firsts = first_places("ACAA,EDAA").expect("two sources");
        assert_eq!(
            firsts.into_iter().collect::<Vec<_>>(),
            [(0, Generated { line: 0, column: 2 })]
        );
    }
}
