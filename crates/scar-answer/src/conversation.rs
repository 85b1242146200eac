//! Follow-up questions: a question that leans on earlier turns ("and for a car?") is rewritten
//! by the chat model into one that stands alone, so that retrieval can find its evidence.

use std::fmt::Write as _;
use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use crate::{GenerationParams, Generator, Prompt, Result};

/// Earlier turns shown to the model when it rewrites: enough for the references a follow-up
/// makes, and a bounded prompt however long the conversation.
const TURNS_SHOWN: usize = 3;
/// Characters of each earlier answer shown.
const ANSWER_CHARS: usize = 600;
/// A rewritten question is one line; this bounds a model that rambles.
const REWRITE_TOKENS: usize = 64;

const SYSTEM: &str = "You rewrite the user's last question so that it can be understood \
without the conversation before it: replace pronouns and vague references with what they refer \
to, keep everything else. Do not answer it. Reply with the rewritten question only, on one line.";

/// One question and the answer it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// The question as the user asked it.
    pub question: String,
    /// The question retrieval searched for: `question` itself, or its stand-alone rewrite.
    pub standalone: String,
    /// The answer.
    pub answer: String,
}

/// The prompt that asks for `follow_up` rewritten in the light of `earlier` turns.
fn rewrite_prompt(earlier: &[Turn], follow_up: &str) -> Prompt {
    let mut user = String::from("Conversation:\n");
    for turn in &earlier[earlier.len().saturating_sub(TURNS_SHOWN)..] {
        let answer: String = turn.answer.trim().chars().take(ANSWER_CHARS).collect();
        let _ = writeln!(
            user,
            "User: {}\nAssistant: {answer}",
            turn.standalone.trim()
        );
    }
    let _ = write!(
        user,
        "\nLast question: {}\nThe last question, rewritten to stand alone:",
        follow_up.trim()
    );
    Prompt {
        system: SYSTEM.to_owned(),
        user,
        sources: Vec::new(),
    }
}

/// `follow_up` as a question that stands alone: unchanged when there are no `earlier` turns,
/// else rewritten by `generator`. A reply that is not a question (small models often answer
/// instead of rewriting) is not searched for: the last question searched for and the follow-up
/// together are, which keeps what the follow-up refers to in the query.
pub fn standalone_question(
    generator: &mut dyn Generator,
    earlier: &[Turn],
    follow_up: &str,
) -> Result<String> {
    let follow_up = follow_up.trim();
    let Some(last) = earlier.last() else {
        return Ok(follow_up.to_owned());
    };
    let params = GenerationParams {
        max_tokens: REWRITE_TOKENS,
        ..GenerationParams::default()
    };
    let generation =
        generator.generate(&rewrite_prompt(earlier, follow_up), &params, &mut |_| {
            ControlFlow::Continue(())
        })?;
    let rewrite = clean_rewrite(&generation.text).filter(|question| question.ends_with('?'));
    Ok(rewrite.unwrap_or_else(|| format!("{} {follow_up}", last.standalone.trim())))
}

/// The question in a model's reply: its first non-empty line, without a label or quotes it
/// may have put around it.
fn clean_rewrite(reply: &str) -> Option<String> {
    let line = reply.lines().map(str::trim).find(|line| !line.is_empty())?;
    let line = line
        .split_once(':')
        .filter(|(label, _)| label.to_ascii_lowercase().contains("question"))
        .map_or(line, |(_, rest)| rest.trim());
    let line = line.trim_matches(['"', '“', '”', '\'', '`']).trim();
    (!line.is_empty()).then(|| line.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Generation, StopReason};

    /// Replies with fixed text and keeps the prompt it was given.
    struct Scripted {
        reply: &'static str,
        prompts: Vec<Prompt>,
    }

    impl Generator for Scripted {
        fn name(&self) -> String {
            "scripted".to_owned()
        }

        fn count_prompt_tokens(&self, _prompt: &Prompt) -> Result<Option<usize>> {
            Ok(None)
        }

        fn generate(
            &mut self,
            prompt: &Prompt,
            params: &GenerationParams,
            _on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
        ) -> Result<Generation> {
            assert_eq!(params.max_tokens, REWRITE_TOKENS);
            self.prompts.push(prompt.clone());
            Ok(Generation {
                text: self.reply.to_owned(),
                prompt_tokens: None,
                generated_tokens: 1,
                stop: StopReason::EndOfTurn,
                first_token_seconds: 0.0,
                total_seconds: 0.0,
            })
        }
    }

    fn turn(question: &str, answer: &str) -> Turn {
        Turn {
            question: question.to_owned(),
            standalone: question.to_owned(),
            answer: answer.to_owned(),
        }
    }

    #[test]
    fn a_first_question_is_not_rewritten() {
        let mut model = Scripted {
            reply: "unused",
            prompts: Vec::new(),
        };
        let question = standalone_question(&mut model, &[], "  What does a kayak cost? ").unwrap();
        assert_eq!(question, "What does a kayak cost?");
        assert!(model.prompts.is_empty());
    }

    #[test]
    fn a_follow_up_is_rewritten_from_the_last_turns() {
        let mut model = Scripted {
            reply: "\n Stand-alone question: \"What does the ferry charge for a car?\"\nextra",
            prompts: Vec::new(),
        };
        let earlier: Vec<Turn> = (1..=5)
            .map(|n| turn(&format!("Question {n}?"), &format!("Answer {n}.")))
            .collect();
        let question = standalone_question(&mut model, &earlier, "And for a car?").unwrap();
        assert_eq!(question, "What does the ferry charge for a car?");
        let user = &model.prompts[0].user;
        assert!(!user.contains("Question 2?"), "{user}");
        assert!(
            user.contains("User: Question 3?\nAssistant: Answer 3.\n"),
            "{user}"
        );
        assert!(user.ends_with(
            "Last question: And for a car?\nThe last question, rewritten to stand alone:"
        ));
        assert!(model.prompts[0].sources.is_empty());
    }

    #[test]
    fn a_reply_that_is_no_question_gives_way_to_the_last_question_and_the_follow_up() {
        let earlier = [turn("What does a kayak cost?", "8 euros.")];
        for reply in [" \n \"\" ", "The answer is: 35 euros."] {
            let mut model = Scripted {
                reply,
                prompts: Vec::new(),
            };
            let question = standalone_question(&mut model, &earlier, "And a car?").unwrap();
            assert_eq!(question, "What does a kayak cost? And a car?", "{reply:?}");
        }
    }
}
