// StoreError: a session file that cannot be used as asked (corrupt, foreign, newer, locked, full
// disk, unknown run).
#pragma once

#include "../error.h"

namespace shardscope::store {

class StoreError : public Error {
 public:
  using Error::Error;
};

}  // namespace shardscope::store
