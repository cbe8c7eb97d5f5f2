#include "app_resources.h"

// Q_INIT_RESOURCE names a function of the global namespace.
static void registerShardscopeResources() {
  Q_INIT_RESOURCE(shardscope);
}

namespace shardscope::ui {

void initResources() {
  static const bool registered = [] {
    registerShardscopeResources();
    return true;
  }();
  (void)registered;
}

QIcon appIcon() {
  initResources();
  return QIcon(":/icons/shardscope.svg");
}

}  // namespace shardscope::ui
