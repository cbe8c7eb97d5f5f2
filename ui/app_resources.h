// The GUI's compiled-in resources (resources/shardscope.qrc): the icon and the example scripts.
#pragma once

#include <QIcon>

namespace shardscope::ui {

// Registers the resources; a static library's resources must be registered by name. Idempotent.
void initResources();

// ShardScope's icon (:/icons/shardscope.svg).
QIcon appIcon();

}  // namespace shardscope::ui
