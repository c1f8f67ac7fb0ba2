# shellcheck shell=sh
# idrrun's hub (hub/install.sh), in /etc/profile.d on every node: a student's JupyterLab
# terminal is a login shell, whose /etc/profile replaces the PATH the hub gave her server; the
# course's environment (IDRRUN_HUB_BIN, which the hub gives every server) goes first again.
# Nothing changes in a shell that the hub did not start.
if [ -n "${IDRRUN_HUB_BIN-}" ]; then
  case ":$PATH:" in
    *":$IDRRUN_HUB_BIN:"*) ;;
    *) PATH="$IDRRUN_HUB_BIN:$PATH"; export PATH ;;
  esac
fi
