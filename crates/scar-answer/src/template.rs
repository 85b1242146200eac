//! Chat templates per model family: how a system and a user message become one prompt string,
//! and which tokens end the assistant's turn.

use serde::{Deserialize, Serialize};

/// A family of chat formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatTemplate {
    /// `<|im_start|>role … <|im_end|>`: `SmolLM2`, `Qwen2` and others.
    ChatMl,
    /// `<|start_header_id|>role<|end_header_id|> … <|eot_id|>`: Llama 3.x.
    Llama3,
}

impl ChatTemplate {
    /// Recognises the family from the model's Jinja template, or failing that from the special
    /// tokens its vocabulary holds.
    pub fn detect<'a>(
        jinja: Option<&str>,
        mut vocabulary: impl Iterator<Item = &'a str>,
    ) -> Option<Self> {
        let from_markers = |text: &str| {
            if text.contains("<|im_start|>") {
                Some(Self::ChatMl)
            } else if text.contains("<|start_header_id|>") {
                Some(Self::Llama3)
            } else {
                None
            }
        };
        jinja
            .and_then(from_markers)
            .or_else(|| vocabulary.find_map(from_markers))
    }

    /// The prompt that asks the model for the assistant's turn.
    #[must_use]
    pub fn render(self, system: &str, user: &str) -> String {
        match self {
            Self::ChatMl => format!(
                "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n\
                 <|im_start|>assistant\n"
            ),
            Self::Llama3 => format!(
                "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>\
                 <|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|>\
                 <|start_header_id|>assistant<|end_header_id|>\n\n"
            ),
        }
    }

    /// Tokens that end the assistant's turn (besides the model's end-of-sequence token).
    #[must_use]
    pub fn end_of_turn(self) -> &'static [&'static str] {
        match self {
            Self::ChatMl => &["<|im_end|>", "<|endoftext|>"],
            Self::Llama3 => &["<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_from_the_template_then_the_vocabulary() {
        let chatml = "{% for message in messages %}<|im_start|>{{ message['role'] }}";
        assert_eq!(
            ChatTemplate::detect(Some(chatml), std::iter::empty()),
            Some(ChatTemplate::ChatMl)
        );
        assert_eq!(
            ChatTemplate::detect(None, ["a", "<|start_header_id|>"].into_iter()),
            Some(ChatTemplate::Llama3)
        );
        assert_eq!(
            ChatTemplate::detect(Some("{{ messages }}"), ["a", "b"].into_iter()),
            None
        );
    }

    #[test]
    fn renders_chatml_with_the_assistant_turn_open() {
        let text = ChatTemplate::ChatMl.render("Be brief.", "Hi");
        assert_eq!(
            text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n\
             <|im_start|>assistant\n"
        );
    }

    #[test]
    fn renders_llama3_headers() {
        let text = ChatTemplate::Llama3.render("S", "U");
        assert!(text.starts_with(
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
        ));
        assert!(text.ends_with("<|start_header_id|>assistant<|end_header_id|>\n\n"));
    }
}
