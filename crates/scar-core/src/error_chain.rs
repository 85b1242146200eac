//! An error and its causes, each shown once.

use std::error::Error;
use std::fmt;

/// An error with the chain of its causes, for showing to a person.
///
/// SCAR's errors leave their cause out of their own message and return it from `source()`, so
/// that a chain never says a thing twice; many errors of other crates put it in their message
/// as well. `ErrorChain` walks the chain and leaves out a cause whose text the message before
/// it already holds. `{}` writes it on one line, `outer: cause: root cause`, for places with one
/// line to give (a skipped file's reason, a status bar); [`ErrorChain::messages`] gives the
/// parts to a caller that lays them out itself (the command line's `caused by:` list).
///
/// ```
/// use scar_core::ErrorChain;
///
/// #[derive(Debug)]
/// struct Outer(std::io::Error);
/// impl std::fmt::Display for Outer {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("cannot read notes.txt")
///     }
/// }
/// impl std::error::Error for Outer {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
///         Some(&self.0)
///     }
/// }
///
/// let error = Outer(std::io::Error::other("disk on fire"));
/// assert_eq!(ErrorChain(&error).to_string(), "cannot read notes.txt: disk on fire");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn Error + 'static));

impl ErrorChain<'_> {
    /// The error's message, then each cause's that says something new, outermost first.
    #[must_use]
    pub fn messages(&self) -> Vec<String> {
        let mut messages: Vec<String> = Vec::new();
        let mut next = Some(self.0);
        while let Some(error) = next {
            let text = error.to_string();
            // A skipped cause's text is inside the kept message, so comparing with the last
            // kept one also catches a root cause that its wrappers all repeat.
            if messages.last().is_none_or(|shown| !shown.contains(&text)) {
                messages.push(text);
            }
            next = error.source();
        }
        messages
    }
}

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.messages().join(": "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a message and an optional cause; `repeat` puts the cause in the message
    /// too, as many errors outside SCAR do.
    #[derive(Debug)]
    struct Layer {
        message: &'static str,
        cause: Option<Box<Layer>>,
        repeat: bool,
    }

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.message)?;
            match &self.cause {
                Some(cause) if self.repeat => write!(f, ": {cause}"),
                _ => Ok(()),
            }
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.cause
                .as_deref()
                .map(|cause| cause as &(dyn Error + 'static))
        }
    }

    fn layer(message: &'static str, cause: Option<Layer>, repeat: bool) -> Layer {
        Layer {
            message,
            cause: cause.map(Box::new),
            repeat,
        }
    }

    #[test]
    fn every_cause_is_shown_once() {
        let root = layer("connection refused", None, false);
        let repeating = layer("request error", Some(root), true);
        let ours = layer("cannot download `m`", Some(repeating), false);
        let chain = ErrorChain(&ours);
        assert_eq!(
            chain.messages(),
            ["cannot download `m`", "request error: connection refused"]
        );
        assert_eq!(
            chain.to_string(),
            "cannot download `m`: request error: connection refused"
        );
    }

    #[test]
    fn an_error_without_causes_is_its_message() {
        let alone = layer("the question is empty", None, false);
        assert_eq!(ErrorChain(&alone).messages(), ["the question is empty"]);
    }
}
