//! The selectors' last answers, so that a run of calls of one shape (the
//! usual loop of small blocking reductions) pays one comparison instead of
//! a selection per call.
//!
//! Invariants:
//! - The selectors stay the only place that decides: a memo holds the
//!   answer `select` gave for the last shape and returns it only for an
//!   equal shape on the same plan, which, `select` being a pure function
//!   of the two, is the answer it would give again.
//! - `Decisions` owns the plan: the only ways to change it (`replace`,
//!   `plan_mut`) forget every memo first, so no answer outlives the plan it
//!   was made on. Whoever changes something a selector reads outside the
//!   plan (nothing today; the allreduce's degree trial changes no input,
//!   but forgets anyway when it ends) calls `forget`.
//! - A communicator that failed is never entered again, so its memos are
//!   never read after a transport fault.
//! - `generation` grows at every `forget` (so at every change of the
//!   plan): a caller that keeps an answer beyond one call (a persistent
//!   request's path, kept from `*_init`) keeps it with the generation it
//!   was made in and asks again once that changed.

use super::allreduce::AllreducePath;
use super::reduce::ReducePath;
use super::{allreduce, reduce, CallShape, Choice, Plan};

/// One selector's last shape and its answer.
#[derive(Clone, Copy, Debug)]
struct Memo<Path> {
    last: Option<(CallShape, Choice<Path>)>,
}

impl<Path> Default for Memo<Path> {
    fn default() -> Self {
        Memo { last: None }
    }
}

impl<Path: Copy> Memo<Path> {
    #[inline]
    fn choose(&mut self, shape: &CallShape, plan: &Plan, select: fn(&CallShape, &Plan) -> Choice<Path>) -> Choice<Path> {
        if let Some((last, choice)) = &self.last
            && last == shape
        {
            return *choice;
        }
        self.choose_afresh(shape, plan, select)
    }

    #[cold]
    #[inline(never)]
    fn choose_afresh(&mut self, shape: &CallShape, plan: &Plan, select: fn(&CallShape, &Plan) -> Choice<Path>) -> Choice<Path> {
        let choice = select(shape, plan);
        self.last = Some((*shape, choice));
        choice
    }
}

/// A communicator's agreed plan and the selectors' answers on it.
#[derive(Clone, Debug, Default)]
pub struct Decisions {
    plan: Plan,
    allreduce: Memo<AllreducePath>,
    reduce: Memo<ReducePath>,
    /// Forgets so far (see the module's invariants).
    generation: u64,
}

impl Decisions {
    pub fn new(plan: Plan) -> Self {
        Decisions { plan, ..Decisions::default() }
    }

    #[inline]
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The plan to change in place; every answer on the old one is
    /// forgotten first.
    pub fn plan_mut(&mut self) -> &mut Plan {
        self.forget();
        &mut self.plan
    }

    /// A new plan in place of the old, whose answers are forgotten.
    pub fn replace(&mut self, plan: Plan) {
        self.forget();
        self.plan = plan;
    }

    /// Drops every remembered answer: the next call of each collective
    /// asks its selector.
    pub fn forget(&mut self) {
        self.allreduce = Memo::default();
        self.reduce = Memo::default();
        self.generation += 1;
    }

    /// Changes at every `forget`, so at every change of the plan: an
    /// answer kept with an equal generation is still the selector's.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// `allreduce::select(shape, plan)`, remembered for the next call.
    #[inline]
    pub fn allreduce(&mut self, shape: &CallShape) -> Choice<AllreducePath> {
        self.allreduce.choose(shape, &self.plan, allreduce::select)
    }

    /// `reduce::select(shape, plan)`, remembered for the next call.
    #[inline]
    pub fn reduce(&mut self, shape: &CallShape) -> Choice<ReducePath> {
        self.reduce.choose(shape, &self.plan, reduce::select)
    }
}

#[cfg(test)]
mod tests;
