#include "synthetic_past.h"

#include <string>

#include "core/error.h"

namespace splitdec {

void fill_synthetic(Session& session, int seq, int64_t length) {
  if (!session.live(seq) || session.length(seq) != 0) throw InputError("fill_synthetic needs an empty live sequence");
  if (length < 1 || length > session.options().capacity)
    throw CapacityError("fill_synthetic: " + std::to_string(length) + " positions do not fit the capacity of " +
                        std::to_string(session.options().capacity));
  // The layout a decode step reads under this plan.
  session.backend().fill_zero_past(seq, length, session.plan().route(false, true));
  session.adopt_past(seq, length);
}

}  // namespace splitdec
