"""The keypoint sets as tables, one row per keypoint in the order the format stores them.

Columns: `name` (as Pose2Sim names it for HALPE_26, COCO_17 and H36M_17; as SMPL and MediaPipe
name theirs), `parent` (the keypoint it hangs from in the set's own skeleton; empty for the root),
`role` (the bone role, solver.retarget.roles, whose bone the keypoint rides on) and `at` (where on
that bone it sits before calibration: its head, its tail, or mid-way).
"""

HALPE_26 = """
name,parent,role,at
Nose,Head,head,mid
LEye,Nose,head,mid
REye,Nose,head,mid
LEar,LEye,head,mid
REar,REye,head,mid
LShoulder,Neck,upper_arm.L,head
RShoulder,Neck,upper_arm.R,head
LElbow,LShoulder,forearm.L,head
RElbow,RShoulder,forearm.R,head
LWrist,LElbow,forearm.L,tail
RWrist,RElbow,forearm.R,tail
LHip,Hip,thigh.L,head
RHip,Hip,thigh.R,head
LKnee,LHip,shin.L,head
RKnee,RHip,shin.R,head
LAnkle,LKnee,foot.L,head
RAnkle,RKnee,foot.R,head
Head,Neck,head,tail
Neck,Hip,neck,head
Hip,,hips,head
LBigToe,LAnkle,toe.L,tail
RBigToe,RAnkle,toe.R,tail
LSmallToe,LBigToe,toe.L,tail
RSmallToe,RBigToe,toe.R,tail
LHeel,LAnkle,foot.L,head
RHeel,RAnkle,foot.R,head
"""

COCO_17 = """
name,parent,role,at
Nose,,head,mid
LEye,Nose,head,mid
REye,Nose,head,mid
LEar,LEye,head,mid
REar,REye,head,mid
LShoulder,Nose,upper_arm.L,head
RShoulder,Nose,upper_arm.R,head
LElbow,LShoulder,forearm.L,head
RElbow,RShoulder,forearm.R,head
LWrist,LElbow,forearm.L,tail
RWrist,RElbow,forearm.R,tail
LHip,LShoulder,thigh.L,head
RHip,RShoulder,thigh.R,head
LKnee,LHip,shin.L,head
RKnee,RHip,shin.R,head
LAnkle,LKnee,foot.L,head
RAnkle,RKnee,foot.R,head
"""

H36M_17 = """
name,parent,role,at
Hip,,hips,head
RHip,Hip,thigh.R,head
RKnee,RHip,shin.R,head
RAnkle,RKnee,foot.R,head
LHip,Hip,thigh.L,head
LKnee,LHip,shin.L,head
LAnkle,LKnee,foot.L,head
Spine,Hip,chest,head
Neck,Spine,neck,head
Nose,Neck,head,mid
Head,Nose,head,tail
LShoulder,Neck,upper_arm.L,head
LElbow,LShoulder,forearm.L,head
LWrist,LElbow,forearm.L,tail
RShoulder,Neck,upper_arm.R,head
RElbow,RShoulder,forearm.R,head
RWrist,RElbow,forearm.R,tail
"""

SMPL_24 = """
name,parent,role,at
pelvis,,hips,head
left_hip,pelvis,thigh.L,head
right_hip,pelvis,thigh.R,head
spine1,pelvis,spine,head
left_knee,left_hip,shin.L,head
right_knee,right_hip,shin.R,head
spine2,spine1,chest,head
left_ankle,left_knee,foot.L,head
right_ankle,right_knee,foot.R,head
spine3,spine2,upper_chest,head
left_foot,left_ankle,toe.L,head
right_foot,right_ankle,toe.R,head
neck,spine3,neck,head
left_collar,spine3,shoulder.L,head
right_collar,spine3,shoulder.R,head
head,neck,head,mid
left_shoulder,left_collar,upper_arm.L,head
right_shoulder,right_collar,upper_arm.R,head
left_elbow,left_shoulder,forearm.L,head
right_elbow,right_shoulder,forearm.R,head
left_wrist,left_elbow,forearm.L,tail
right_wrist,right_elbow,forearm.R,tail
left_hand,left_wrist,hand.L,tail
right_hand,right_wrist,hand.R,tail
"""

MEDIAPIPE_33 = """
name,parent,role,at
nose,,head,mid
left_eye_inner,nose,head,mid
left_eye,nose,head,mid
left_eye_outer,nose,head,mid
right_eye_inner,nose,head,mid
right_eye,nose,head,mid
right_eye_outer,nose,head,mid
left_ear,left_eye_outer,head,mid
right_ear,right_eye_outer,head,mid
mouth_left,nose,head,mid
mouth_right,nose,head,mid
left_shoulder,nose,upper_arm.L,head
right_shoulder,nose,upper_arm.R,head
left_elbow,left_shoulder,forearm.L,head
right_elbow,right_shoulder,forearm.R,head
left_wrist,left_elbow,forearm.L,tail
right_wrist,right_elbow,forearm.R,tail
left_pinky,left_wrist,hand.L,tail
right_pinky,right_wrist,hand.R,tail
left_index,left_wrist,hand.L,tail
right_index,right_wrist,hand.R,tail
left_thumb,left_wrist,hand.L,mid
right_thumb,right_wrist,hand.R,mid
left_hip,left_shoulder,thigh.L,head
right_hip,right_shoulder,thigh.R,head
left_knee,left_hip,shin.L,head
right_knee,right_hip,shin.R,head
left_ankle,left_knee,foot.L,head
right_ankle,right_knee,foot.R,head
left_heel,left_ankle,foot.L,head
right_heel,right_ankle,foot.R,head
left_foot_index,left_ankle,toe.L,tail
right_foot_index,right_ankle,toe.R,tail
"""

TABLES = {"HALPE_26": HALPE_26, "COCO_17": COCO_17, "H36M_17": H36M_17, "SMPL_24": SMPL_24,
          "MEDIAPIPE_33": MEDIAPIPE_33}
