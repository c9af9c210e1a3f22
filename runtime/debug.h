// GGEMM_DEBUG=1 (any value but 0 or empty): every call prints its tensor
// maps, chosen config and launch geometry to stderr.
#pragma once

namespace ggemm {

bool debug_enabled();

}  // namespace ggemm
