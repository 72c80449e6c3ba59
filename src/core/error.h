// The error types are public (include/splitdec/error.h) so that programs
// embedding splitdec can catch them by kind.
#pragma once

#include "splitdec/error.h"
