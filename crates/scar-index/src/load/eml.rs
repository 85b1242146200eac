//! E-mail messages (`.eml`) through mail-parser: the subject as the heading, the sender,
//! recipients and date under it, then the text; attachments in a format the loader reads are
//! documents of their own, named by their file names.

use std::path::Path;

use mail_parser::{Address, MessageParser, MimeHeaders};

use super::outline::Outline;
use super::zipped::corrupt;
use super::{Attachment, Format, Heading, LoadError, LoadOptions, load_bytes};

/// The message's text and headings, and its attachments in formats the loader reads; an
/// attachment that cannot be read is a warning.
pub(super) fn to_text(
    bytes: &[u8],
    limit: u64,
    warnings: &mut Vec<String>,
) -> Result<(String, Vec<Heading>, Vec<Attachment>), LoadError> {
    let message = MessageParser::default()
        .parse(bytes)
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
    for index in 0..message.text_body_count() {
        if let Some(body) = message.body_text(index) {
            for paragraph in body.replace("\r\n", "\n").split("\n\n") {
                outline.paragraph(paragraph);
            }
        }
    }
    let options = LoadOptions {
        max_file_bytes: limit,
    };
    let mut attachments = Vec::new();
    for attachment in message.attachments() {
        let Some(name) = attachment.attachment_name() else {
            continue;
        };
        // Only files the loader knows by name: an attachment's bytes are not sniffed as text.
        if Format::named(Path::new(name)).is_none() {
            continue;
        }
        match load_bytes(Path::new(name), attachment.contents(), &options) {
            Ok(mut document) => {
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
    use super::*;

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
            to_text(message.as_bytes(), 1 << 20, &mut warnings).unwrap();
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
