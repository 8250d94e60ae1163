// tests/test_attn64_qknorm_layer.c: the qk-norm layer suite (tests/test_qknorm_layer.c: the numpy
// reference of the normalised q, k, the layer output and its weights, the finite-difference checks
// of the raw qkv and both gains, thread invariance) on the double build of attention/
// (-DATTN_REAL_DOUBLE): the reference at TOL = 1e-9 and the gradients with tests/attn64_cfg.h's
// 1e-6 relative check, which a 0.5% error in one entry fails.
#include "tests/test_qknorm_layer.c"
