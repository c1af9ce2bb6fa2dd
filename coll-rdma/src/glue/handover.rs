//! Why a call goes to the module underneath: the reasons the selectors
//! (`crate::select`) give, and the one the adapter finds itself (no
//! transport).

pub(super) use crate::select::Handover;
