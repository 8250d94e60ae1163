// tests/test_attn64_ref_rowmaps.c: the row-map reference suite (tests/test_ref_rowmaps.c: every
// registered row map, every choice value, the numeric sweeps, rows up to n = 300 at T = 320 >
// T_train = 200) on the double build of attention/ (-DATTN_REAL_DOUBLE), against the same
// float64 reference tests/ref/ref_rowmaps.py at RTOL = 1e-9: a forward that is right in float only
// to float rounding, or wrong in the double-only code paths, fails here.
#include "tests/test_ref_rowmaps.c"
