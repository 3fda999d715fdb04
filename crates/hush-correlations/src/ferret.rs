//! Ferret (CCS 2020), the interactive baseline — implementation follows in the next commit.
