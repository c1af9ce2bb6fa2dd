//! The degree-k reduction tree rooted at rank 0 (Gupta 2002, section 6.2):
//! the link table is `tuning::tree`, shared with the simulator, so that
//! both build the same tree.

pub(crate) use tuning::tree::TreeLinks;
