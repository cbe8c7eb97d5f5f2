// The File > Examples menu: one entry per example script of the Qt resource file (:/examples/),
// titled from its header comment. Choosing one hands its text to the caller (the main window
// loads it into the script editor).
#pragma once

#include <QMenu>
#include <functional>

#include "resources/example_catalog.h"

namespace shardscope::ui {

// The examples compiled into the GUI's resources, ordered by name.
std::vector<examples::Example> resourceExamples();

// A menu titled "Examples" whose entries call `chosen` with their example.
QMenu* examplesMenu(QWidget* parent, std::function<void(const examples::Example&)> chosen);

}  // namespace shardscope::ui
