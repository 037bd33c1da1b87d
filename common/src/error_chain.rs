//! One line for an error and every cause below it, as logs, results and evidence show it.

/// An error and its causes on one line, for results that cross the wire as text. A cause whose
/// text its parent already quotes (HTTP clients do this) is not repeated.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
