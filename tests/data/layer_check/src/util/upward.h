// A util header that includes the engine: an upward include the layer check must refuse.
#pragma once
#include "engine/engine_header.h"
