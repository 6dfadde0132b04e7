// A test that takes a helper from another test folder instead of tests/testing: the layer check must refuse it.
#include "fake.h"
