"""InverseKinematicsTool setups and IK task sets: the upstream gait2354 files (read in place) and
small hand-written ones, checked against the `opensim` package's own reader when installed."""

import warnings

import numpy as np
import pytest

from solver.opensim import OpenSimFileError, OpenSimFileWarning
from solver.opensim.setup import read_ik_setup, read_ik_task_set
from tests.opensim_reference import DATA, needs_data
from tests.opensim_reference import opensim as _opensim


@needs_data
def test_gait_setup_misspelled_root_and_task_file():
    s = read_ik_setup(DATA / "subject01_Setup_InverseKinematics.xml")
    assert s.name == "subject01"
    assert s.model_file == DATA / "subject01_simbody.osim"
    assert s.marker_file == DATA / "subject01_synthetic_marker_data.trc"
    assert s.coordinate_file is None                          # <coordinate_file> </coordinate_file>
    assert s.output_motion_file == DATA / "subject01_walk1_ik_test.mot"
    assert s.results_directory == DATA
    assert s.time_range == (0.4, 1.6) and s.accuracy == 1e-5 and s.constraint_weight == 10.0
    assert s.report_errors is False and s.report_marker_locations is True
    assert s.tasks.path == DATA / "gait2354_IK_Tasks_uniform.xml"
    assert len(s.tasks.marker_tasks) == 31 and not s.tasks.coordinate_tasks
    assert set(s.tasks.marker_weights().values()) == {1.0}
    assert list(s.tasks.marker_weights())[:2] == ["Sternum", "R.Acromium"]


@needs_data
def test_gait_setup_without_model():
    s = read_ik_setup(DATA / "subject01_Setup_InverseKinematics_NoModel.xml")
    assert s.model_file is None and s.constraint_weight == 100.0 and s.time_range == (0.4, 1.6)
    assert s.report_errors is True and s.report_marker_locations is False     # OpenSim's defaults
    assert len(s.tasks) == 31


@needs_data
def test_gait_setup_matches_opensim():
    osim = _opensim()
    theirs = osim.InverseKinematicsTool(str(DATA / "subject01_Setup_InverseKinematics.xml"))
    ours = read_ik_setup(DATA / "subject01_Setup_InverseKinematics.xml")
    assert (theirs.get_accuracy(), theirs.get_constraint_weight()) == (ours.accuracy, ours.constraint_weight)
    assert (theirs.get_time_range(0), theirs.get_time_range(1)) == ours.time_range
    assert theirs.get_report_errors() == ours.report_errors
    assert theirs.get_report_marker_locations() == ours.report_marker_locations
    assert DATA / theirs.get_model_file().strip() == ours.model_file
    assert DATA / theirs.get_marker_file().strip() == ours.marker_file
    tasks = theirs.getIKTaskSet()
    assert {tasks.get(i).getName(): tasks.get(i).getWeight() for i in range(tasks.getSize())} == ours.tasks.marker_weights()


@needs_data
def test_stray_closing_tag_is_tolerated_with_a_warning():
    with pytest.warns(OpenSimFileWarning, match=r"gait2354_IK_Tasks\.xml, line 292: .*</OpenSimDocument>"):
        tasks = read_ik_task_set(DATA / "gait2354_IK_Tasks.xml")
    assert len(tasks.marker_tasks) == 31 and len(tasks.coordinate_tasks) == 4
    assert sorted(set(tasks.marker_weights().values())) == [0.5, 0.75, 1.0, 2.0, 10.0]
    assert tasks.coordinate_weights() == {"subtalar_angle_r": 1000.0, "mtp_angle_r": 10.0,
                                          "subtalar_angle_l": 10.0, "mtp_angle_l": 10.0}
    assert all(t.value_type == "default_value" and t.value == 0.0 for t in tasks.coordinate_tasks)


@needs_data
def test_stray_closing_tag_task_set_matches_opensim():
    osim = _opensim()
    theirs = osim.IKTaskSet(str(DATA / "gait2354_IK_Tasks.xml"))     # OpenSim accepts the stray tag too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OpenSimFileWarning)
        ours = read_ik_task_set(DATA / "gait2354_IK_Tasks.xml")
    weights = {**ours.marker_weights(), **ours.coordinate_weights()}
    assert {theirs.get(i).getName(): theirs.get(i).getWeight() for i in range(theirs.getSize())} == weights
    kinds = {theirs.get(i).getName(): theirs.get(i).getConcreteClassName() for i in range(theirs.getSize())}
    assert {n for n, k in kinds.items() if k == "IKCoordinateTask"} == set(ours.coordinate_weights())


INLINE = """<?xml version="1.0" encoding="UTF-8" ?>
<OpenSimDocument Version="40000">
  <InverseKinematicsTool name="inline">
    <results_directory>out</results_directory>
    <model_file>models/m.osim</model_file>
    <coordinate_file>coords.mot</coordinate_file>
    <IKTaskSet name="tasks">
      <objects>
        <IKMarkerTask name="A"><apply>false</apply><weight>3</weight></IKMarkerTask>
        <IKMarkerTask name="B"><weight> 2.5 </weight></IKMarkerTask>
        <IKCoordinateTask name="knee"><weight>1</weight><value_type>manual_value</value_type><value>0.25</value></IKCoordinateTask>
        <IKCoordinateTask name="hip"><apply>true</apply><weight>2</weight><value_type>from_file</value_type></IKCoordinateTask>
        <IKCoordinateTask name="ankle"/>
      </objects>
      <groups/>
    </IKTaskSet>
  </InverseKinematicsTool>
</OpenSimDocument>
"""


def test_inline_task_set_and_defaults(tmp_path):
    path = tmp_path / "setup.xml"
    path.write_text(INLINE)
    s = read_ik_setup(path)
    assert s.results_directory == tmp_path / "out" and s.model_file == tmp_path / "models" / "m.osim"
    assert s.time_range == (-np.inf, np.inf) and s.constraint_weight == np.inf and s.accuracy == 1e-5
    assert s.marker_file is None and s.output_motion_file is None
    assert s.tasks.marker_weights() == {"B": 2.5}
    assert s.tasks.marker_weights(applied_only=False) == {"A": 3.0, "B": 2.5}
    knee, hip, ankle = s.tasks.coordinate_tasks
    assert (knee.value_type, knee.value, hip.value_type, hip.weight) == ("manual_value", 0.25, "from_file", 2.0)
    assert (ankle.apply, ankle.weight, ankle.value_type, ankle.value) == (True, 0.0, "default_value", 0.0)


def test_inline_task_set_matches_opensim(tmp_path):
    osim = _opensim()
    path = tmp_path / "setup.xml"
    path.write_text(INLINE)
    theirs = osim.InverseKinematicsTool(str(path)).getIKTaskSet()
    ours = read_ik_setup(path).tasks
    for i in range(theirs.getSize()):
        task = theirs.get(i)
        mine = next(t for t in ours.marker_tasks + ours.coordinate_tasks if t.name == task.getName())
        assert (task.getApply(), task.getWeight()) == (mine.apply, mine.weight)
        coord = osim.IKCoordinateTask.safeDownCast(task)
        if coord is not None:
            assert coord.getValue() == mine.value
            assert ["default_value", "manual_value", "from_file"][coord.getValueType()] == mine.value_type


def test_task_file_resolves_relative_to_the_setup(tmp_path):
    (tmp_path / "setups" / "tasks").mkdir(parents=True)
    (tmp_path / "setups" / "tasks" / "t.xml").write_text(
        '<IKTaskSet><objects><IKMarkerTask name="X"><weight>1</weight></IKMarkerTask></objects></IKTaskSet>')
    (tmp_path / "setups" / "s.xml").write_text(
        '<InverseKinemtaticsTool><IKTaskSet file="tasks/t.xml"/><time_range>0 1</time_range></InverseKinemtaticsTool>')
    s = read_ik_setup(tmp_path / "setups" / "s.xml")
    assert s.tasks.path == tmp_path / "setups" / "tasks" / "t.xml" and s.tasks.marker_weights() == {"X": 1.0}


@pytest.mark.parametrize("body, line, words", [
    ('<InverseKinematicsTool>\n<IKTaskSet file="nope.xml"/>\n</InverseKinematicsTool>', 2, "does not exist"),
    ('<InverseKinematicsTool>\n<report_errors>maybe</report_errors>\n</InverseKinematicsTool>', 2, "true or false"),
    ('<InverseKinematicsTool>\n<time_range>1</time_range>\n</InverseKinematicsTool>', 2, "needs 2 numbers"),
    ('<InverseKinematicsTool>\n<time_range>2 1</time_range>\n</InverseKinematicsTool>', 2, "starts after"),
    ('<InverseKinematicsTool>\n<accuracy>fine</accuracy>\n</InverseKinematicsTool>', 2, "must hold numbers"),
    ('<InverseKinematicsTool>\n<IKTaskSet><objects>\n<IKCoordinateTask name="k">\n'
     '<value_type>guess</value_type></IKCoordinateTask></objects></IKTaskSet>\n</InverseKinematicsTool>', 4, "value_type"),
    ('<InverseKinematicsTool>\n<IKTaskSet><objects>\n<IKMarkerTask name="k"><weight>-1</weight></IKMarkerTask>'
     '</objects></IKTaskSet>\n</InverseKinematicsTool>', 3, "weight"),
    ('<InverseKinematicsTool>\n<IKTaskSet><objects>\n<IKMarkerTask name="k"/>\n<IKMarkerTask name="k"/>'
     '</objects></IKTaskSet>\n</InverseKinematicsTool>', 4, "second IKMarkerTask"),
    ('<InverseKinematicsTool>\n<IKTaskSet><objects>\n<Thing name="k"/></objects></IKTaskSet>\n</InverseKinematicsTool>',
     3, "unknown task type"),
    ('<InverseKinematicsTool>\n<accuracy>1</accurac>\n</InverseKinematicsTool>', 2, "not well-formed"),
    ('<ScaleTool>\n</ScaleTool>', 1, "expected <InverseKinematicsTool>"),
])
def test_malformed_setup_names_file_and_line(tmp_path, body, line, words):
    path = tmp_path / "bad.xml"
    path.write_text(body)
    with pytest.raises(OpenSimFileError) as info:
        read_ik_setup(path)
    assert info.value.line == line and words in info.value.reason and info.value.path == path
