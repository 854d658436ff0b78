// SPDX-License-Identifier: GPL-2.0

//! The UD transport: datagrams of one packet each, addressed per WQE ([`send`]) and landing
//! behind a GRH in the next receive WQE ([`recv`]).

pub(crate) mod recv;
pub(crate) mod send;
