// Support form: the additional-network fields show for technical support only, and the
// chosen project's support level is spelled out. The form works without this script.
"use strict";

const topic = document.getElementById("support-topic");
const fields = document.getElementById("network-fields");
const project = document.getElementById("support-project");
const level = document.getElementById("support-level");

function showNetworkFields() {
  if (!topic || !fields) return;
  fields.hidden = topic.value !== "technical";
}

function showLevel() {
  if (!project || !level) return;
  const chosen = project.options[project.selectedIndex];
  const promise = chosen ? chosen.dataset.promise : "";
  level.textContent = promise ? `Support for this project: ${promise}.` : "";
}

if (topic) topic.addEventListener("change", showNetworkFields);
if (project) project.addEventListener("change", showLevel);
showNetworkFields();
showLevel();
