; Windows per-user installer for hermes-tray (no admin rights, nothing machine-wide).
;
;   makensis -DVERSION=0.1.0 -DPAYLOAD=C:\path\dist\hermes-tray -DOUTFILE=setup.exe packaging\windows\hermes-tray.nsi
;
; (packaging/build.py nsis --bundle DIR runs exactly this, after checking DIR is a Windows bundle;
; Debian's makensis builds it on Linux from a bundle built on Windows.)
; PAYLOAD is the PyInstaller one-folder build: hermes-tray.exe (tray, no console),
; hermes-tray-cli.exe (same program with a console) and _internal\.
;
; Installs to %LOCALAPPDATA%\Programs\hermes-tray, adds a Start-menu shortcut that carries the
; AppUserModelID (Windows only delivers toast notifications for an app whose AUMID is on a
; Start-menu shortcut), an uninstall entry under HKCU, and optionally the per-user Run value
; that `hermes-tray autostart on` also writes. Installer and uninstaller first ask a running tray
; to quit. The uninstaller removes the toast registration too, and keeps the user's settings,
; journal and logs (%LOCALAPPDATA%\hermes-tray).

Unicode true
ManifestDPIAware true
SetCompressor /SOLID lzma

!ifndef VERSION
  !define VERSION "0.0.0"
!endif
!ifndef PAYLOAD
  !error "pass -DPAYLOAD=<PyInstaller one-folder build of hermes-tray>"
!endif
!ifndef OUTFILE
  !define OUTFILE "hermes-tray-${VERSION}-windows-setup.exe"
!endif

!define APP "hermes-tray"
!define APP_NAME "Hermes Tray"
!define PUBLISHER "hermes-tray contributors"
; = hermes_tray.autostart.base.WINDOWS_AUMID: the app name desktop-notifier registers and sends
; toasts under (HKCU\Software\Classes\AppUserModelId\Hermes Tray).
!define AUMID "Hermes Tray"
!define UNINST_KEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\${APP}"
; = hermes_tray.autostart.windows.RUN_KEY / APPROVED_KEY, value name "hermes-tray".
!define RUN_KEY "Software\Microsoft\Windows\CurrentVersion\Run"
!define APPROVED_KEY "Software\Microsoft\Windows\CurrentVersion\Explorer\StartupApproved\Run"
!define SHORTCUT "$SMPROGRAMS\${APP_NAME}.lnk"
; = the key desktop-notifier writes for an unpackaged app's toasts (winrt backend, register_hkey).
!define NOTIFY_KEY "Software\Classes\AppUserModelId\${AUMID}"
; = hermes_tray.app.single_instance.SingleInstance("tray").server_name on Windows, as a named pipe:
; hermes-tray-<user name>-tray. The running tray quits when it reads the line "quit".
!define PIPE_PREFIX "\\.\pipe\${APP}-"

Name "${APP_NAME}"
OutFile "${OUTFILE}"
RequestExecutionLevel user
InstallDir "$LOCALAPPDATA\Programs\${APP}"
InstallDirRegKey HKCU "${UNINST_KEY}" "InstallLocation"
BrandingText "${APP_NAME} ${VERSION}"

!include MUI2.nsh
!include LogicLib.nsh
!include FileFunc.nsh
!include Win\COM.nsh
!include Win\Propkey.nsh
!define /ifndef VT_LPWSTR 31
!define /ifndef STGM_READWRITE 2

!ifdef ICON
  !define MUI_ICON "${ICON}"
  !define MUI_UNICON "${ICON}"
!endif
!define MUI_ABORTWARNING
!define MUI_COMPONENTSPAGE_NODESC
!define MUI_FINISHPAGE_RUN "$INSTDIR\${APP}.exe"
!define MUI_FINISHPAGE_RUN_TEXT "Start ${APP_NAME} now"

!insertmacro MUI_PAGE_COMPONENTS
!insertmacro MUI_PAGE_DIRECTORY
!insertmacro MUI_PAGE_INSTFILES
!insertmacro MUI_PAGE_FINISH
!insertmacro MUI_UNPAGE_CONFIRM
!insertmacro MUI_UNPAGE_INSTFILES
!insertmacro MUI_LANGUAGE "English"

Function .onInit
  SetShellVarContext current
FunctionEnd

Function un.onInit
  SetShellVarContext current
FunctionEnd

; Stamp the AppUserModelID on an existing shortcut (path on the stack), through the shell's
; own COM interfaces: IShellLink → IPersistFile::Load → IPropertyStore::SetValue → Save.
Function SetShortcutAUMID
  Exch $R0 ; shortcut path
  Push $0
  Push $1
  Push $2
  Push $3
  Push $4
  Push $5
  Push $6
  !insertmacro ComHlpr_CreateInProcInstance ${CLSID_ShellLink} ${IID_IShellLink} r1 ""
  ${If} $1 P<> 0
    ${IUnknown::QueryInterface} $1 '("${IID_IPersistFile}",.r2)i.r0'
    ${If} $0 = 0
      ${IPersistFile::Load} $2 '("$R0",${STGM_READWRITE})i.r0'
      ${If} $0 = 0
        ${IUnknown::QueryInterface} $1 '("${IID_IPropertyStore}",.r3)i.r0'
        ${If} $0 = 0
          System::Call '*${SYSSTRUCT_PROPERTYKEY}(${PKEY_AppUserModel_ID})p.r4'
          System::Call '*(&w128 "${AUMID}")p.r6'
          System::Call '*${SYSSTRUCT_PROPVARIANT}(${VT_LPWSTR},,p r6)p.r5'
          ${IPropertyStore::SetValue} $3 '($4,$5)i.r0'
          ${If} $0 = 0
            ${IPropertyStore::Commit} $3 "i.r0"
          ${EndIf}
          ${If} $0 = 0
            ${IPersistFile::Save} $2 '("$R0",1)i.r0'
          ${EndIf}
          System::Free $4
          System::Free $5
          System::Free $6
          ${IUnknown::Release} $3 ""
        ${EndIf}
      ${EndIf}
      ${IUnknown::Release} $2 ""
    ${EndIf}
    ${IUnknown::Release} $1 ""
  ${Else}
    StrCpy $0 "no IShellLink"
  ${EndIf}
  ${If} $0 != 0
    DetailPrint "Could not set the notification identity on the shortcut ($0)"
  ${EndIf}
  Pop $6
  Pop $5
  Pop $4
  Pop $3
  Pop $2
  Pop $1
  Pop $0
  Pop $R0
FunctionEnd

; Ask a running tray to quit through its single-instance pipe, then wait until the program files
; are free. When they stay in use (a hung tray, the helper, a console command), tell the user:
; Retry after quitting it, or Cancel (a silent run cancels). Defined for installer and uninstaller.
!macro QUIT_RUNNING_APP un
Function ${un}QuitRunningApp
  Push $0
  Push $1
  Push $2
  Push $3
  ReadEnvStr $1 USERNAME
  ; GENERIC_READ|GENERIC_WRITE, no sharing, OPEN_EXISTING
  System::Call 'kernel32::CreateFileW(w "${PIPE_PREFIX}$1-tray", i 0xC0000000, i 0, p 0, i 3, i 0, p 0) p.r0'
  ${If} $0 <> -1
    System::Call 'kernel32::WriteFile(p r0, m "quit$\n", i 5, *i .r2, p 0) i.r2'
    DetailPrint "Asked the running ${APP_NAME} to quit"
    StrCpy $2 0
    ${Do}  ; wait (at most 3 s) for its "ok", so the line is read before the pipe closes
      StrCpy $3 0
      System::Call 'kernel32::PeekNamedPipe(p r0, p 0, i 0, p 0, *i .r3, p 0) i'
      ${IfThen} $3 > 0 ${|} ${ExitDo} ${|}
      Sleep 100
      IntOp $2 $2 + 1
    ${LoopUntil} $2 >= 30
    System::Call 'kernel32::CloseHandle(p r0)'
  ${EndIf}
  StrCpy $2 0
  ${Do}
    StrCpy $3 ""
    ${If} ${FileExists} "$INSTDIR\${APP}.exe"
      ClearErrors
      FileOpen $0 "$INSTDIR\${APP}.exe" a  ; a running program cannot be opened for writing
      ${If} ${Errors}
        StrCpy $3 "${APP}.exe"
      ${Else}
        FileClose $0
      ${EndIf}
    ${EndIf}
    ${If} $3 == ""
    ${AndIf} ${FileExists} "$INSTDIR\${APP}-cli.exe"
      ClearErrors
      FileOpen $0 "$INSTDIR\${APP}-cli.exe" a
      ${If} ${Errors}
        StrCpy $3 "${APP}-cli.exe"
      ${Else}
        FileClose $0
      ${EndIf}
    ${EndIf}
    ${If} $3 == ""
      ${ExitDo}
    ${EndIf}
    ${If} $2 >= 50  ; 10 s
      MessageBox MB_RETRYCANCEL|MB_ICONEXCLAMATION "${APP_NAME} is still running ($3). Quit it (tray icon → Quit; the helper: hermes-tray-cli autostart off --helper, then end it in Task Manager) and press Retry." /SD IDCANCEL IDRETRY +2
      Abort "${APP_NAME} is still running: quit it and run this again."
      StrCpy $2 0
    ${EndIf}
    Sleep 200
    IntOp $2 $2 + 1
  ${Loop}
  Pop $3
  Pop $2
  Pop $1
  Pop $0
FunctionEnd
!macroend
!insertmacro QUIT_RUNNING_APP ""
!insertmacro QUIT_RUNNING_APP "un."

Section "${APP_NAME}" SecMain
  SectionIn RO
  SetOutPath "$INSTDIR"
  Call QuitRunningApp  ; an upgrade cannot replace the files of a running tray
  ; Replace the program files as a whole (an upgrade must not keep stale libraries).
  RMDir /r "$INSTDIR\_internal"
  File /r "${PAYLOAD}\*.*"
  WriteUninstaller "$INSTDIR\uninstall.exe"

  CreateShortCut "${SHORTCUT}" "$INSTDIR\${APP}.exe" "" "$INSTDIR\${APP}.exe" 0
  Push "${SHORTCUT}"
  Call SetShortcutAUMID

  WriteRegStr HKCU "${UNINST_KEY}" "DisplayName" "${APP_NAME}"
  WriteRegStr HKCU "${UNINST_KEY}" "DisplayVersion" "${VERSION}"
  WriteRegStr HKCU "${UNINST_KEY}" "Publisher" "${PUBLISHER}"
  WriteRegStr HKCU "${UNINST_KEY}" "InstallLocation" "$INSTDIR"
  WriteRegStr HKCU "${UNINST_KEY}" "DisplayIcon" "$INSTDIR\${APP}.exe"
  WriteRegStr HKCU "${UNINST_KEY}" "UninstallString" '"$INSTDIR\uninstall.exe"'
  WriteRegStr HKCU "${UNINST_KEY}" "QuietUninstallString" '"$INSTDIR\uninstall.exe" /S'
  WriteRegDWORD HKCU "${UNINST_KEY}" "NoModify" 1
  WriteRegDWORD HKCU "${UNINST_KEY}" "NoRepair" 1
  ${GetSize} "$INSTDIR" "/S=0K" $0 $1 $2
  IntFmt $0 "0x%08X" $0
  WriteRegDWORD HKCU "${UNINST_KEY}" "EstimatedSize" "$0"
SectionEnd

Section /o "Start at login" SecAutostart
  ; The same value `hermes-tray autostart on` writes; clearing Task Manager's "disabled" flag.
  WriteRegStr HKCU "${RUN_KEY}" "${APP}" '"$INSTDIR\${APP}.exe"'
  DeleteRegValue HKCU "${APPROVED_KEY}" "${APP}"
SectionEnd

Section "Uninstall"
  Call un.QuitRunningApp
  DeleteRegValue HKCU "${RUN_KEY}" "${APP}"
  DeleteRegValue HKCU "${RUN_KEY}" "${APP}-helper"
  DeleteRegValue HKCU "${APPROVED_KEY}" "${APP}"
  DeleteRegValue HKCU "${APPROVED_KEY}" "${APP}-helper"
  Delete "${SHORTCUT}"
  ; Only our own files: the folder may have been chosen by hand.
  RMDir /r "$INSTDIR\_internal"
  Delete "$INSTDIR\${APP}.exe"
  Delete "$INSTDIR\${APP}-cli.exe"
  Delete "$INSTDIR\LICENSE"
  Delete "$INSTDIR\THIRD-PARTY-NOTICES.txt"
  Delete "$INSTDIR\uninstall.exe"
  RMDir "$INSTDIR"
  DeleteRegKey HKCU "${UNINST_KEY}"
  ; The toast registration desktop-notifier made for this app (its display name and icon).
  DeleteRegKey HKCU "${NOTIFY_KEY}"
  ; %LOCALAPPDATA%\hermes-tray (settings, journal, logs) is the user's and stays.
SectionEnd
