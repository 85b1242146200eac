//! Chat templates per model family: how a system and a user message become one prompt string,
//! and which tokens end the assistant's turn.

use serde::{Deserialize, Serialize};

/// A family of chat formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatTemplate {
    /// `<|im_start|>role … <|im_end|>`: `SmolLM2`, Qwen 2 and others.
    ChatMl,
    /// `ChatML` with an empty `<think>` block opening the answer, so a Qwen 3 model answers
    /// without reasoning aloud first.
    ChatMlNoThinking,
    /// `<|start_header_id|>role<|end_header_id|> … <|eot_id|>`: Llama 3.x.
    Llama3,
    /// `<start_of_turn>user … <end_of_turn>`, no system role: Gemma.
    Gemma,
    /// `<|system|> … <|end|>`: Phi-3.
    Phi3,
    /// `[INST] … [/INST]`, no system role: Mistral and Mixtral.
    Mistral,
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
            } else if text.contains("<start_of_turn>") {
                Some(Self::Gemma)
            } else if text.contains("<|assistant|>") {
                Some(Self::Phi3)
            } else if text.contains("[INST]") {
                Some(Self::Mistral)
            } else {
                None
            }
        };
        match jinja.and_then(from_markers) {
            // Qwen 3's template takes `enable_thinking`; off, it writes the empty block.
            Some(Self::ChatMl) if jinja.is_some_and(|j| j.contains("enable_thinking")) => {
                Some(Self::ChatMlNoThinking)
            }
            Some(found) => Some(found),
            None => vocabulary.find_map(from_markers),
        }
    }

    /// The prompt that asks the model for the assistant's turn.
    #[must_use]
    pub fn render(self, system: &str, user: &str) -> String {
        match self {
            Self::ChatMl | Self::ChatMlNoThinking => {
                let think = if self == Self::ChatMlNoThinking {
                    "<think>\n\n</think>\n\n"
                } else {
                    ""
                };
                format!(
                    "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n\
                     <|im_start|>assistant\n{think}"
                )
            }
            Self::Llama3 => format!(
                "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>\
                 <|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|>\
                 <|start_header_id|>assistant<|end_header_id|>\n\n"
            ),
            // Gemma's and Mistral's templates put the system text at the head of the first user
            // turn.
            Self::Gemma => format!(
                "<start_of_turn>user\n{system}\n\n{user}<end_of_turn>\n<start_of_turn>model\n"
            ),
            Self::Phi3 => {
                format!("<|system|>\n{system}<|end|>\n<|user|>\n{user}<|end|>\n<|assistant|>\n")
            }
            Self::Mistral => format!("[INST] {system}\n\n{user} [/INST]"),
        }
    }

    /// Tokens that end the assistant's turn (besides the model's end-of-sequence token).
    #[must_use]
    pub fn end_of_turn(self) -> &'static [&'static str] {
        match self {
            Self::ChatMl | Self::ChatMlNoThinking => &["<|im_end|>", "<|endoftext|>"],
            Self::Llama3 => &["<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"],
            Self::Gemma => &["<end_of_turn>", "<eos>"],
            Self::Phi3 => &["<|end|>", "<|endoftext|>"],
            Self::Mistral => &["</s>"],
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
    fn recognises_gemma_phi3_mistral_and_qwen3() {
        let none = std::iter::empty;
        assert_eq!(
            ChatTemplate::detect(None, ["<bos>", "<start_of_turn>"].into_iter()),
            Some(ChatTemplate::Gemma)
        );
        assert_eq!(
            ChatTemplate::detect(Some("{{ '<|user|>' }}{{ '<|assistant|>' }}"), none()),
            Some(ChatTemplate::Phi3)
        );
        assert_eq!(
            ChatTemplate::detect(Some("{{ '[INST] ' + content + ' [/INST]' }}"), none()),
            Some(ChatTemplate::Mistral)
        );
        let qwen3 = "{%- if enable_thinking is defined %}<|im_start|>assistant";
        assert_eq!(
            ChatTemplate::detect(Some(qwen3), none()),
            Some(ChatTemplate::ChatMlNoThinking)
        );
        assert!(
            ChatTemplate::ChatMlNoThinking
                .render("S", "U")
                .ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n")
        );
    }

    #[test]
    fn gemma_has_no_system_turn() {
        assert_eq!(
            ChatTemplate::Gemma.render("S", "U"),
            "<start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\n"
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
