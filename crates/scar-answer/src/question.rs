//! A question's whole pipeline, from its seeds to the finished answer: the policy's context and
//! static ±1's from the same seeds, the answer generated from the first, its citations and
//! sentences traced, and both prompts' sizes. Every front end answers through here.

use std::ops::ControlFlow;

use scar_policy::Options;
use scar_retrieve::{
    ChunkStore, Neighbourhood, Prepared, Retriever, SearchReport, baseline_options,
};

use crate::{Answer, AnswerReport, GenerationParams, Generator, Prompt, Result};

/// A question searched and ready to answer: the context `options`' policy chose, and static
/// ±1's from the same seeds, whose prompt the answer's is measured against.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    report: SearchReport,
    baseline: SearchReport,
}

impl Question {
    /// Runs `options`' policy and static ±1 over `prepared`'s seeds (microseconds: no model).
    #[expect(
        clippy::result_large_err,
        reason = "the retriever's own error, passed on as its callers already handle it"
    )]
    pub fn search<S: ChunkStore>(
        retriever: &Retriever<S>,
        prepared: &Prepared,
        options: &Options,
    ) -> scar_retrieve::Result<Self> {
        Ok(Self {
            report: retriever.expand(prepared, options)?,
            baseline: retriever.expand_baseline(prepared)?,
        })
    }

    /// [`search`](Self::search) over the seeds' documents as `neighbourhood` read them,
    /// reading nothing from the store: for a front end that decides again as a control moves.
    #[expect(
        clippy::result_large_err,
        reason = "the retriever's own error, passed on as its callers already handle it"
    )]
    pub fn search_in<S: ChunkStore>(
        retriever: &Retriever<S>,
        neighbourhood: &Neighbourhood,
        prepared: &Prepared,
        options: &Options,
    ) -> scar_retrieve::Result<Self> {
        Ok(Self {
            report: retriever.expand_in(neighbourhood, prepared, options)?,
            baseline: retriever.expand_in(neighbourhood, prepared, &baseline_options()?)?,
        })
    }

    /// The policy's search: the context an answer is built from.
    #[must_use]
    pub fn report(&self) -> &SearchReport {
        &self.report
    }

    /// Answers from the policy's context with `generator`, passing each piece of text to
    /// `on_text` as it comes (`Break` stops the answer), then traces each sentence to its source
    /// with `retriever`'s model and index (the ones the search ran on).
    pub fn answer<S: ChunkStore>(
        self,
        generator: &mut dyn Generator,
        retriever: &Retriever<S>,
        params: &GenerationParams,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<AnswerReport> {
        // The paper's saving is in prompt tokens: what static ±1's context would have cost.
        let baseline_prompt_tokens =
            generator.count_prompt_tokens(&Prompt::from_report(&self.baseline))?;
        let answer = Answer::generate(generator, &self.report, params, on_text, retriever)?;
        Ok(AnswerReport::new(
            self.report,
            answer,
            baseline_prompt_tokens,
        ))
    }
}
