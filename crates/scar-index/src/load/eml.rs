//! E-mail messages (`.eml`) through mail-parser: the subject as the heading, the sender,
//! recipients and date under it, then the text; attachments in a format the loader reads are
//! documents of their own, named by their file names.

use std::path::Path;

use mail_parser::{Address, MessageParser, MimeHeaders};

use super::outline::Outline;
use super::zipped::corrupt;
use super::{Attachment, Format, Heading, LoadError, LoadOptions, human_size, load_carried};
use crate::error::catch_panic_quietly;

/// How deep mail is read inside mail: a forward of a forward of a forward, and no further.
const MAX_DEPTH: usize = 8;

/// The message's text and headings, and its attachments in formats the loader reads; an
/// attachment that cannot be read is a warning. The message carried `depth` mails deep and
/// everything it carries share the limit of the file that holds them.
pub(super) fn to_text(
    bytes: &[u8],
    options: &LoadOptions,
    depth: usize,
    warnings: &mut Vec<String>,
) -> Result<(String, Vec<Heading>, Vec<Attachment>), LoadError> {
    // mail-parser asserts, in builds with debug assertions, that each part finds the
    // multipart it belongs to, which a malformed message breaks: a corrupt mail, not a crash.
    let message = catch_panic_quietly(|| MessageParser::default().parse(bytes))
        .map_err(|panic| corrupt("e-mail", format!("the mail reader failed ({panic})")))?
        .ok_or_else(|| corrupt("e-mail", "it has no message headers"))?;
    let mut outline = Outline::default();
    outline.heading(1, message.subject().unwrap_or("(no subject)"));
    let mut headers = Vec::new();
    for (label, address) in [
        ("From", message.from()),
        ("To", message.to()),
        ("Cc", message.cc()),
    ] {
        if let Some(names) = address.map(addresses).filter(|names| !names.is_empty()) {
            headers.push(format!("{label}: {names}"));
        }
    }
    if let Some(date) = message.date() {
        headers.push(format!("Date: {}", date.to_rfc3339()));
    }
    outline.paragraph(&headers.join("\n"));
    // The limit is shared: the message's text, then each attachment's text as it is read.
    let mut used: u64 = 0;
    for index in 0..message.text_body_count() {
        if let Some(body) = message.body_text(index) {
            used += body.len() as u64;
            for paragraph in body.replace("\r\n", "\n").split("\n\n") {
                outline.paragraph(paragraph);
            }
        }
    }
    let limit = options.max_file_bytes;
    let mut attachments = Vec::new();
    for attachment in message.attachments() {
        let Some(name) = attachment.attachment_name() else {
            continue;
        };
        // Only files the loader knows by name: an attachment's bytes are not sniffed as text.
        let Some(format) = Format::named(Path::new(name)) else {
            continue;
        };
        if format == Format::Email && depth >= MAX_DEPTH {
            warnings.push(format!(
                "attachment {name} left out: mail is read {MAX_DEPTH} messages deep, no deeper"
            ));
            continue;
        }
        let left = limit.saturating_sub(used);
        if attachment.contents().len() as u64 > left {
            warnings.push(format!(
                "attachment {name} left out: with the text before it, it runs past the {} \
                 limit of the file that carries it; raise --max-file-mib to index it",
                human_size(limit)
            ));
            continue;
        }
        let inner = LoadOptions {
            max_file_bytes: left,
            ..options.clone()
        };
        match load_carried(Path::new(name), attachment.contents(), &inner, depth + 1) {
            Ok(mut document) => {
                used += document.text.len() as u64
                    + document
                        .attachments
                        .iter()
                        .map(|carried| carried.document.text.len() as u64)
                        .sum::<u64>();
                // A forwarded mail's own attachments are documents beside it, named by the way
                // to them.
                let inner = std::mem::take(&mut document.attachments);
                attachments.push(Attachment {
                    name: name.to_owned(),
                    document,
                });
                attachments.extend(inner.into_iter().map(|attachment| Attachment {
                    name: format!("{name} › {}", attachment.name),
                    ..attachment
                }));
            }
            Err(error) => warnings.push(format!(
                "attachment {name} left out: {}",
                scar_core::ErrorChain(&error)
            )),
        }
    }
    let (text, headings) = outline.finish();
    Ok((text, headings, attachments))
}

/// Names and addresses as a mail client shows them: `Ana Ruiz <ana@example.org>, …`.
fn addresses(address: &Address) -> String {
    address
        .iter()
        .map(|addr| match (addr.name(), addr.address()) {
            (Some(name), Some(email)) => format!("{name} <{email}>"),
            (Some(name), None) => name.to_owned(),
            (None, Some(email)) => email.to_owned(),
            (None, None) => String::new(),
        })
        .filter(|entry| !entry.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;

    fn options(limit: u64) -> LoadOptions {
        LoadOptions {
            max_file_bytes: limit,
            ..LoadOptions::default()
        }
    }

    /// A message whose attachment `name` holds `attached`.
    fn mail_carrying(subject: &str, name: &str, attached: &str) -> String {
        format!(
            "Subject: {subject}\r\nMIME-Version: 1.0\r\n\
             Content-Type: multipart/mixed; boundary=\"b{subject}x\"\r\n\r\n\
             --b{subject}x\r\nContent-Type: text/plain\r\n\r\nSee the file.\r\n\
             --b{subject}x\r\nContent-Type: application/octet-stream; name=\"{name}\"\r\n\
             Content-Disposition: attachment; filename=\"{name}\"\r\n\r\n\
             {attached}\r\n--b{subject}x--\r\n"
        )
    }

    #[test]
    fn mail_inside_mail_is_read_to_a_bounded_depth() {
        let mut message = "Subject: bottom\r\n\r\nThe innermost text.\r\n".to_owned();
        for level in 0..1000 {
            message = mail_carrying(&level.to_string(), "fwd.eml", &message);
        }
        let mut warnings = Vec::new();
        let (_, _, attachments) =
            to_text(message.as_bytes(), &options(50 << 20), 0, &mut warnings).unwrap();
        assert_eq!(attachments.len(), MAX_DEPTH);
        assert!(warnings.is_empty(), "{warnings:?}");
        let deepest = &attachments[MAX_DEPTH - 1].document;
        assert!(
            deepest.warnings.iter().any(|w| w.contains("no deeper")),
            "{:?}",
            deepest.warnings
        );
    }

    /// Found by the fuzzer: a part that cannot find the multipart it belongs to.
    #[test]
    fn a_part_outside_its_multipart_is_a_corrupt_mail_not_a_panic() {
        let message = "V \nContent-Type: multipart/mixed; boundary=\"===0268==\"\n\n\
                       --===en--===0268==\nContent-Type: message/rfc822\nChment\n\n\
                       Subj\nContent-Type: message/rfc822\nont226-\n\n-==5\n\n\
                       --===0268==--\n\n-\n";
        let mut warnings = Vec::new();
        let read = to_text(message.as_bytes(), &options(1 << 20), 0, &mut warnings);
        // The assertion is compiled in where dependencies keep debug assertions, as the tests'
        // profile does; elsewhere the reader goes on.
        if cfg!(debug_assertions) {
            let error = read.expect_err("a corrupt mail");
            let chain = scar_core::ErrorChain(&error).to_string();
            assert!(chain.contains("the mail reader failed"), "{chain}");
        }
    }

    #[test]
    fn a_mail_and_its_attachments_share_one_limit() {
        let text = "tide ".repeat(40_000);
        let mut parts = String::new();
        for i in 0..6 {
            let _ = write!(
                parts,
                "--b\r\nContent-Type: text/plain; name=\"t{i}.txt\"\r\n\
                 Content-Disposition: attachment; filename=\"t{i}.txt\"\r\n\r\n{text}\r\n"
            );
        }
        let message = format!(
            "Subject: tables\r\nMIME-Version: 1.0\r\n\
             Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n{parts}--b--\r\n"
        );
        let mut warnings = Vec::new();
        let (_, _, attachments) =
            to_text(message.as_bytes(), &options(500_000), 0, &mut warnings).unwrap();
        assert_eq!(attachments.len(), 2);
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert!(warnings[0].contains("runs past the"), "{warnings:?}");
    }

    #[test]
    fn headers_and_text_are_the_message_and_readable_attachments_documents_of_their_own() {
        let message = "From: Ana Ruiz <ana@example.org>\r\n\
To: harbour@example.org\r\n\
Subject: Crane inspection\r\n\
Date: Fri, 1 May 2026 09:30:00 +0000\r\n\
MIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n\
--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n\
The crane passed.\r\n\r\nNext check in June.\r\n\
--b1\r\nContent-Type: text/markdown; name=\"notes.md\"\r\n\
Content-Disposition: attachment; filename=\"notes.md\"\r\n\r\n\
# Findings\r\n\r\nCable worn at the hook.\r\n\
--b1\r\nContent-Type: application/octet-stream; name=\"photo.raw\"\r\n\
Content-Disposition: attachment; filename=\"photo.raw\"\r\n\r\n\
xyz\r\n--b1--\r\n";
        let mut warnings = Vec::new();
        let (text, headings, attachments) =
            to_text(message.as_bytes(), &options(1 << 20), 0, &mut warnings).unwrap();
        assert!(
            text.starts_with(
                "Crane inspection\n\nFrom: Ana Ruiz <ana@example.org>\nTo: harbour@example.org\n\
                 Date: 2026-05-01T09:30:00Z\n\nThe crane passed.\n\nNext check in June."
            ),
            "{text}"
        );
        assert!(
            !text.contains("Findings") && !text.contains("xyz"),
            "{text}"
        );
        let titles: Vec<(u8, &str)> = headings
            .iter()
            .map(|h| (h.level, h.title.as_str()))
            .collect();
        assert_eq!(titles, [(1, "Crane inspection")]);
        // The raw photo is in no format the loader reads: not a document, not a warning.
        assert_eq!(attachments.len(), 1);
        let notes = &attachments[0];
        assert_eq!(notes.name, "notes.md");
        assert_eq!(notes.document.format, Format::Markdown);
        assert_eq!(
            notes.document.text,
            "# Findings\r\n\r\nCable worn at the hook."
        );
        assert_eq!(notes.document.headings[0].title, "Findings");
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
