//! `evaluate_answers` on the example documents, with a scripted chat model whose answer is one
//! quoted sentence of the evidence and one claim that no source holds.

use std::ops::ControlFlow;

use scar_answer::{Generation, GenerationParams, Generator, Prompt, StopReason};
use scar_eval::{AnswerEvalOptions, Benchmark, Scope, evaluate_answers, resolve};
use scar_index::Index;
use scar_policy::{Options, Policy};
use scar_retrieve::{FirstStage, Retriever};
use scar_test_support::{example_index, minilm, workspace};

const EVIDENCE: &str = "A kayak that was not booked is only carried";
const INVENTED: &str = "Purple elephants dance quietly on Neptune.";

/// Quotes the evidence sentence, citing the source it is in (or source 1 when the context
/// lacks it), then claims something no source says.
struct Quoting;

impl Generator for Quoting {
    fn name(&self) -> String {
        "quoting".to_owned()
    }

    fn count_prompt_tokens(&self, prompt: &Prompt) -> scar_answer::Result<Option<usize>> {
        Ok(Some(prompt.user.split_whitespace().count()))
    }

    fn generate(
        &mut self,
        prompt: &Prompt,
        _params: &GenerationParams,
        _on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> scar_answer::Result<Generation> {
        let number = prompt.user.find(EVIDENCE).map_or(1, |at| {
            let marker = prompt.user[..at].rfind("\n[").unwrap() + 2;
            let end = marker + prompt.user[marker..].find(']').unwrap();
            prompt.user[marker..end].parse().unwrap()
        });
        Ok(Generation {
            text: format!(
                "A kayak that was not booked is only carried if there is room once every booked \
                 vehicle and kayak is on board [{number}]. {INVENTED}"
            ),
            prompt_tokens: None,
            generated_tokens: 20,
            stop: StopReason::EndOfTurn,
            first_token_seconds: 0.5,
            total_seconds: 1.0,
        })
    }
}

// Shares of a few sentences and the scripted seconds are exact in binary.
#[allow(clippy::float_cmp)]
#[test]
fn a_quoted_sentence_is_found_in_the_gold_chunk_and_an_invented_one_is_flagged() {
    let corpus = workspace().join("assets/example");
    let text = fs_err::read_to_string(corpus.join("ferry-handbook.md")).unwrap();
    let start = text[..text.find(EVIDENCE).unwrap()].chars().count();
    let end = start
        + "A kayak that was not booked is only carried if there is room once every booked\n\
           vehicle and kayak is on board"
            .chars()
            .count();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kayak.json");
    let benchmark = serde_json::json!({"tests": [{
        "id": "kayak",
        "query": "Is a kayak that was not booked carried on the ferry?",
        "snippets": [{"file_path": "ferry-handbook.md", "span": [start, end]}],
    }]});
    fs_err::write(&path, benchmark.to_string()).unwrap();
    let benchmark = Benchmark::load(&path).unwrap();
    let resolved = resolve(&benchmark, &path, &corpus, None).unwrap();
    let retriever = Retriever::new(minilm(), Index::open(example_index()).unwrap()).unwrap();
    let options = AnswerEvalOptions {
        k: 2,
        first_stage: FirstStage::Hybrid,
        scope: Scope::Index,
        policies: vec![
            Options::new(Policy::evidence(2)).unwrap(),
            Options::new(Policy::StaticWindow { window: 1 }).unwrap(),
        ],
        params: GenerationParams::default(),
    };
    let mut seen = Vec::new();
    let report = evaluate_answers(&retriever, &resolved, &mut Quoting, &options, &mut |p| {
        seen.push((p.done, p.total));
    })
    .unwrap();
    assert_eq!(seen, [(0, 2), (1, 2), (2, 2)]);
    assert_eq!(report.schema, "scar.answers/1");
    assert_eq!((report.questions, report.records.len()), (1, 2));
    for (record, summary) in report.records.iter().zip(&report.summaries) {
        assert_eq!(record.policy, summary.policy);
        // The question finds the handbook's kayak paragraph with both policies, and the quote is
        // found in the chunk it was quoted from, the one cited.
        assert_eq!(record.context_recall, 1.0, "{record:?}");
        assert!(record.cites);
        assert_eq!((record.sentences, record.found), (2, 1), "{record:?}");
        assert_eq!((record.found_in_gold, record.disagreements), (1, 0));
        // The scripted model gives no count, so the evaluation asks for one.
        assert!(record.prompt_tokens.is_some_and(|t| t > 20));
        assert_eq!(summary.flag_rate, 0.5);
        assert_eq!(summary.gold_attribution_rate, 1.0);
        assert_eq!(summary.median_first_token_seconds, 0.5);
    }
    assert_eq!(report.summaries[1].policy, "static ±1");
    let markdown = report.to_markdown();
    assert!(markdown.contains(INVENTED) && markdown.contains("| static ±1 |"));
}
