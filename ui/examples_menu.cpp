#include "examples_menu.h"

#include <QDir>
#include <QFile>

#include "app_resources.h"

namespace shardscope::ui {

std::vector<examples::Example> resourceExamples() {
  initResources();
  std::vector<examples::Example> out;
  const QDir dir(":/examples");
  for (const QString& file : dir.entryList({"*.py"}, QDir::Files, QDir::Name)) {
    QFile f(dir.filePath(file));
    if (!f.open(QIODevice::ReadOnly)) continue;
    out.push_back(examples::parseExample(QFileInfo(file).completeBaseName().toStdString(),
                                         f.readAll().toStdString()));
  }
  return out;
}

QMenu* examplesMenu(QWidget* parent, std::function<void(const examples::Example&)> chosen) {
  auto* menu = new QMenu(QObject::tr("E&xamples"), parent);
  for (const examples::Example& e : resourceExamples()) {
    QAction* action = menu->addAction(QString::fromStdString(e.title));
    action->setObjectName(QString::fromStdString("example_" + e.name));
    action->setToolTip(QString::fromStdString(e.description + " Model: " + e.model));
    action->setStatusTip(QString::fromStdString("Model: " + e.model));
    QObject::connect(action, &QAction::triggered, parent, [e, chosen] { chosen(e); });
  }
  menu->setToolTipsVisible(true);
  return menu;
}

}  // namespace shardscope::ui
