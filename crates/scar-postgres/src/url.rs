//! Store URLs as messages and logs show them: never with a password.

/// `url` with any password replaced by `***`: in the URL form
/// (`postgres://user:secret@host/db`, `?password=secret`) and the key-value form
/// (`host=h password=secret`). Where the form is ambiguous, more is hidden, never less.
#[must_use]
pub fn redacted(url: &str) -> String {
    let url_form = ["postgres://", "postgresql://"]
        .iter()
        .find(|scheme| url.starts_with(**scheme));
    let Some(scheme) = url_form else {
        return redacted_key_values(url);
    };
    let rest = &url[scheme.len()..];
    // The user information runs to an `@`, and a password may hold `/`, `?` or `@`: everything
    // from the first `:` to the last `@` goes.
    let rest = match (rest.rfind('@'), rest.find(':')) {
        (Some(at), Some(colon)) if colon < at => {
            format!("{}:***{}", &rest[..colon], &rest[at..])
        }
        _ => rest.to_owned(),
    };
    let rest = match rest.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => {
                        format!("{key}=***")
                    }
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => rest,
    };
    format!("{scheme}{rest}")
}

/// libpq's key-value form with each `password` value replaced; a value may be quoted (with
/// `\'` inside) or not (with `\` escaping the next character).
fn redacted_key_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("password") {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let after_key = from["password".len()..].trim_start();
        let Some(value) = after_key.strip_prefix('=') else {
            out.push_str("password");
            rest = &from["password".len()..];
            continue;
        };
        let value = value.trim_start();
        let quoted = value.starts_with('\'');
        let mut escaped = false;
        let mut end = value.len();
        for (i, c) in value.char_indices().skip(usize::from(quoted)) {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if (quoted && c == '\'') || (!quoted && c.is_whitespace()) {
                end = if quoted { i + 1 } else { i };
                break;
            }
        }
        out.push_str("password=***");
        rest = &value[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn passwords_never_show() {
        let cases = [
            (
                "postgres://ann:s3cret@db:5432/scar",
                "postgres://ann:***@db:5432/scar",
            ),
            (
                "postgresql://ann:p@ss@db/scar",
                "postgresql://ann:***@db/scar",
            ),
            ("postgres://ann@db/scar", "postgres://ann@db/scar"),
            (
                "postgres://db/scar?user=ann&password=s3cret&sslmode=disable",
                "postgres://db/scar?user=ann&password=***&sslmode=disable",
            ),
            (
                "host=db password=s3cret user=ann",
                "host=db password=*** user=ann",
            ),
            (
                "host=db password = 'a b\\' c' user=ann",
                "host=db password=*** user=ann",
            ),
            // A password holding `/`, `?` or `@`, a value holding `://`, an escaped space.
            (
                "postgres://ann:pa/s3cret?x@db/scar",
                "postgres://ann:***@db/scar",
            ),
            ("host=db password=ab://s3cret", "host=db password=***"),
            (
                "host=db password=a\\ s3cret user=ann",
                "host=db password=*** user=ann",
            ),
        ];
        for (url, shown) in cases {
            assert_eq!(redacted(url), shown);
            assert!(!redacted(url).contains("s3cret") && !redacted(url).contains("a b"));
        }
    }
}
