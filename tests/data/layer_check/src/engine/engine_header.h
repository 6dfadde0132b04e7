// An engine header, included from util by upward.h.
#pragma once
#include "util/upward.h"
