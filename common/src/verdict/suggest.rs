//! "Did you mean": the names that ran closest to a criterion's name that did not.

use std::collections::BTreeSet;

/// Up to three names that ran and are closest to `declared`: first those that are `declared`
/// qualified by a module, a parent or a `test_` prefix (`tests::full_pages`,
/// `TestPager/full_pages`, `pager > full_pages`, `test_full_pages`), then by edit distance over names compared without case and with
/// spaces, `-` and `_` alike (a node:test sentence against its snake_case spelling), within a
/// third of the name's length.
pub fn suggest<'a>(declared: &str, ran: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    const SHOWN: usize = 3;
    let fold = |name: &str| -> Vec<char> {
        name.chars()
            .map(|c| match c {
                ' ' | '-' => '_',
                c => c.to_ascii_lowercase(),
            })
            .collect()
    };
    let wanted = fold(declared);
    let limit = (wanted.len() / 3).max(2);
    let mut scored: Vec<(usize, &str)> = Vec::new();
    for name in ran.into_iter().collect::<BTreeSet<_>>() {
        if name == declared {
            continue;
        }
        // A Python test's own prefix counts as a qualifier: `test_full_pages` for `full_pages`.
        let qualified = [":", "/", ".", " > ", " ", "test_"]
            .iter()
            .any(|separator| name.ends_with(&format!("{separator}{declared}")));
        let score = if qualified {
            0
        } else {
            let distance = edit_distance(&wanted, &fold(name));
            if distance > limit {
                continue;
            }
            distance + 1
        };
        scored.push((score, name));
    }
    scored.sort();
    scored
        .into_iter()
        .take(SHOWN)
        .map(|(_, name)| name.to_owned())
        .collect()
}

/// Levenshtein distance.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}
