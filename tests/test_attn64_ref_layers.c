// tests/test_attn64_ref_layers.c: the layer reference suite (tests/test_ref_layers.c: every
// layer-level variant, every choice value, the numeric values, the inner maps, every position
// encoding, odd head counts, layers > 0 and T > T_train) on the double build of attention/
// (-DATTN_REAL_DOUBLE), against the same float64 reference tests/ref/ref_layers.py with float64
// inputs and results at TOL = 1e-9.
#include "tests/test_ref_layers.c"
