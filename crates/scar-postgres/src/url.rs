//! Store URLs as messages and logs show them: never with a password.

/// `url` with any password replaced by `***`: in the URL form
/// (`postgres://user:secret@host/db`, `?password=secret`) and the key-value form
/// (`host=h password=secret`).
#[must_use]
pub fn redacted(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        let authority = match authority.rsplit_once('@') {
            Some((user_info, host)) => match user_info.split_once(':') {
                Some((user, _)) => format!("{user}:***@{host}"),
                None => authority.to_owned(),
            },
            None => authority.to_owned(),
        };
        let tail = match tail.split_once('?') {
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
            None => tail.to_owned(),
        };
        return format!("{scheme}://{authority}{tail}");
    }
    // Key-value form: a password's value may be quoted, and hold spaces.
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
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
        let end = if let Some(quoted) = value.strip_prefix('\'') {
            let mut escaped = false;
            let close = quoted
                .char_indices()
                .find(|&(_, c)| {
                    let closes = c == '\'' && !escaped;
                    escaped = c == '\\' && !escaped;
                    closes
                })
                .map_or(quoted.len(), |(i, _)| i + 1);
            value.len() - quoted.len() + close
        } else {
            value.find(char::is_whitespace).unwrap_or(value.len())
        };
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
        ];
        for (url, shown) in cases {
            assert_eq!(redacted(url), shown);
            assert!(!redacted(url).contains("s3cret") && !redacted(url).contains("a b"));
        }
    }
}
