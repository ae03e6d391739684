"""The link to the rig: transport (serial, TCP, UDP), framing and messages (``protocol``), the record
decoder (``batch``, ``udp``, ``udp_receiver``), the command layer (``rig``) and the session."""
