use std::sync::atomic::{AtomicUsize, Ordering};

use super::super::tests::{contiguous, plan, shape};
use super::super::{DataShape, FlatSchedules, LeadersOnly, NotContiguous};
use super::*;
use btl_ibmc::shm::NodeGroups;

/// Shapes in an order that repeats some and alternates others.
fn calls() -> Vec<CallShape> {
    let short = shape(4, contiguous(16, 4), true);
    let to_rank_3 = CallShape { root: 3, ..short };
    let long = shape(1 << 15, contiguous(1 << 17, 4), true);
    let gaps = shape(2, DataShape::Packable { bytes: 8, why: NotContiguous::Gaps }, true);
    vec![
        short,
        short,
        to_rank_3,
        short,
        shape(4, contiguous(16, 4), false),
        long,
        long,
        shape(0, contiguous(0, 4), true),
        gaps,
        gaps,
        shape(-1, contiguous(0, 4), true),
        short,
        shape(4096, contiguous(16384, 4), true),
        shape(4097, contiguous(16388, 4), true),
        // The same count, another answer: each field of the shape counts.
        shape(4097, contiguous(16388, 4), false),
        shape(1, contiguous(4, 4), false),
        shape(1, contiguous(4096, 4096), false),
        shape(1, DataShape::Unreadable(NotContiguous::Query(-5)), false),
        shape(256, contiguous(1024, 4), true),
    ]
}

#[test]
fn every_call_gets_the_selectors_own_answer() {
    let mut decisions = Decisions::new(plan());
    for (index, call) in calls().iter().enumerate() {
        assert_eq!(decisions.reduce(call), reduce::select(call, &plan()), "reduce, call {index}: {call:?}");
        assert_eq!(decisions.allreduce(call), allreduce::select(call, &plan()), "allreduce, call {index}: {call:?}");
    }
}

#[test]
fn a_changed_plan_gets_a_fresh_decision() {
    let short = shape(4, contiguous(16, 4), true);
    let mut decisions = Decisions::new(plan());
    assert_eq!(decisions.reduce(&short), Choice::Native(ReducePath::Tree));
    assert_eq!(decisions.allreduce(&short), Choice::Native(AllreducePath::Exchange));

    decisions.plan_mut().size = 1;
    assert_eq!(decisions.reduce(&short), Choice::Native(ReducePath::Alone), "after plan_mut");
    assert_eq!(decisions.allreduce(&short), Choice::Native(AllreducePath::Alone), "after plan_mut");

    let mut leaders = plan();
    let flat = FlatSchedules { allreduce: true, reduce: true, bcast: false };
    leaders.leaders_only = Some(LeadersOnly { nodes: NodeGroups::from_keys(&[0, 0, 1, 1]), flat });
    decisions.replace(leaders.clone());
    assert_eq!(decisions.reduce(&short), reduce::select(&short, &leaders), "after replace");
    assert!(matches!(decisions.reduce(&short), Choice::HandOver(_)));
    assert!(matches!(decisions.allreduce(&short), Choice::HandOver(_)), "after replace");
    assert_eq!(decisions.plan().size, 4);
}

#[test]
fn the_generation_changes_with_the_plan_and_only_then() {
    // A persistent request keeps its path from `*_init` while the
    // generation it was decided in lasts: every change of the plan, and
    // every forget, must move it; answering calls must not.
    let short = shape(4, contiguous(16, 4), true);
    let mut decisions = Decisions::new(plan());
    let start = decisions.generation();
    decisions.reduce(&short);
    decisions.allreduce(&shape(4, contiguous(1 << 20, 4), true));
    assert_eq!(decisions.generation(), start, "answers keep the generation");
    decisions.plan_mut().size = 1;
    let after_plan_mut = decisions.generation();
    assert_ne!(after_plan_mut, start, "plan_mut");
    decisions.replace(plan());
    assert_ne!(decisions.generation(), after_plan_mut, "replace");
    let before_forget = decisions.generation();
    decisions.forget();
    assert_ne!(decisions.generation(), before_forget, "forget");
}

static ASKED: AtomicUsize = AtomicUsize::new(0);

fn counting_select(shape: &CallShape, plan: &Plan) -> Choice<ReducePath> {
    ASKED.fetch_add(1, Ordering::Relaxed);
    reduce::select(shape, plan)
}

#[test]
fn the_selector_is_asked_again_for_a_new_shape_and_after_forget() {
    let (short, long) = (shape(4, contiguous(16, 4), true), shape(1 << 15, contiguous(1 << 17, 4), true));
    let mut memo = Memo::default();
    let asked = |memo: &mut Memo<ReducePath>, call: &CallShape| {
        let before = ASKED.load(Ordering::Relaxed);
        let choice = memo.choose(call, &plan(), counting_select);
        assert_eq!(choice, reduce::select(call, &plan()));
        ASKED.load(Ordering::Relaxed) - before
    };
    assert_eq!(asked(&mut memo, &short), 1, "first call");
    assert_eq!(asked(&mut memo, &short), 0, "a repeat is remembered");
    assert_eq!(asked(&mut memo, &long), 1, "a new shape");
    assert_eq!(asked(&mut memo, &CallShape { root: 2, ..long }), 1, "a new root");
    assert_eq!(asked(&mut memo, &CallShape { commutative: false, root: 2, ..long }), 1, "another op");
    memo = Memo::default();
    assert_eq!(asked(&mut memo, &CallShape { commutative: false, root: 2, ..long }), 1, "after forget");

    // `Decisions::forget` drops what was remembered (the degree trial's end).
    let mut decisions = Decisions::new(plan());
    decisions.reduce(&short);
    assert!(decisions.reduce.last.is_some());
    decisions.forget();
    assert!(decisions.reduce.last.is_none() && decisions.allreduce.last.is_none());
}
