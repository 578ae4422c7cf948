<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="zh_CN">
<context>
    <name>Action</name>
    <message>
        <source>Cancel</source>
        <translation>取消</translation>
    </message>
    <message>
        <source>Pause</source>
        <translation>暂停</translation>
    </message>
    <message>
        <source>Resume</source>
        <translation>继续</translation>
    </message>
    <message>
        <source>Retry</source>
        <translation>重试</translation>
    </message>
    <message>
        <source>Re-run</source>
        <translation>重新生成</translation>
    </message>
    <message>
        <source>Move up</source>
        <translation>上移</translation>
    </message>
    <message>
        <source>Move down</source>
        <translation>下移</translation>
    </message>
    <message>
        <source>Edit with words…</source>
        <translation>用文字编辑…</translation>
    </message>
    <message>
        <source>Show in folder</source>
        <translation>在文件夹中显示</translation>
    </message>
    <message>
        <source>Undo cancel</source>
        <translation>撤销取消</translation>
    </message>
    <message>
        <source>Stop the selected jobs for good</source>
        <translation>彻底停止所选任务</translation>
    </message>
    <message>
        <source>Hold the selected jobs; running ones keep their progress</source>
        <translation>暂停所选任务；运行中的任务保留进度</translation>
    </message>
    <message>
        <source>Queue paused jobs again, continuing where they stopped</source>
        <translation>将暂停的任务重新排队，从停下的地方继续</translation>
    </message>
    <message>
        <source>Try failed or timed-out jobs again</source>
        <translation>重试失败或超时的任务</translation>
    </message>
    <message>
        <source>Queue a new job with the same settings and seed</source>
        <translation>用相同的设置和种子新建一个任务</translation>
    </message>
    <message>
        <source>Change this image as an instruction says (&quot;make it night&quot;)</source>
        <translation>按指令修改这张图片（&quot;改成夜晚&quot;）</translation>
    </message>
    <message>
        <source>Open the folder of the image file with the file selected</source>
        <translation>打开图像文件所在的文件夹并选中该文件</translation>
    </message>
    <message>
        <source>Keep the jobs you just cancelled</source>
        <translation>保留刚刚取消的任务</translation>
    </message>
    <message>
        <source>Move to top</source>
        <translation>移到最前</translation>
    </message>
    <message>
        <source>Move to bottom</source>
        <translation>移到最后</translation>
    </message>
    <message>
        <source>Star</source>
        <translation>收藏</translation>
    </message>
    <message>
        <source>Upscale ×2</source>
        <translation>放大 ×2</translation>
    </message>
    <message>
        <source>Variations…</source>
        <translation>变体…</translation>
    </message>
    <message>
        <source>Use as init image</source>
        <translation>用作初始图像</translation>
    </message>
    <message>
        <source>One place up the queue: runs sooner (Ctrl+Up)</source>
        <translation>在队列中上移一位：更早运行（Ctrl+Up）</translation>
    </message>
    <message>
        <source>One place down the queue: runs later (Ctrl+Down)</source>
        <translation>在队列中下移一位：更晚运行（Ctrl+Down）</translation>
    </message>
    <message>
        <source>Run next: before every other queued job</source>
        <translation>下一个运行：排在所有排队任务之前</translation>
    </message>
    <message>
        <source>Run last: after every other queued job</source>
        <translation>最后运行：排在所有排队任务之后</translation>
    </message>
    <message>
        <source>Mark as a favourite (or unmark); favourites are never pruned</source>
        <translation>收藏（或取消收藏）；收藏的任务永远不会被清理</translation>
    </message>
    <message>
        <source>Queue a job that enlarges the image twice and redraws its details</source>
        <translation>排队一个任务：把图像放大两倍并重绘细节</translation>
    </message>
    <message>
        <source>Queue images close to this one, with new seeds</source>
        <translation>用新的种子排队与此图相近的图像</translation>
    </message>
    <message>
        <source>Start a new picture from this image (image to image)</source>
        <translation>以这张图像为起点生成新图（图生图）</translation>
    </message>
</context>
<context>
    <name>ApiAccessFields</name>
    <message>
        <source>Programs send it as: Authorization: Bearer &lt;token&gt;</source>
        <translation>程序这样发送它：Authorization: Bearer &lt;token&gt;</translation>
    </message>
    <message>
        <source>e.g. easel.lan, separated by commas</source>
        <translation>例如 easel.lan，用逗号分隔</translation>
    </message>
    <message>
        <source>Other names the API answers to; any other is refused</source>
        <translation>API 还接受的主机名；其他名称一律拒绝</translation>
    </message>
    <message>
        <source>A1111 clients without the token (this computer only)</source>
        <translation>A1111 客户端无需令牌（仅限本机）</translation>
    </message>
    <message>
        <source>For A1111 clients that cannot send a token</source>
        <translation>用于无法发送令牌的 A1111 客户端</translation>
    </message>
</context>
<context>
    <name>ApiServer</name>
    <message>
        <source>API: starting on port {port}</source>
        <translation>API：正在端口 {port} 上启动</translation>
    </message>
    <message>
        <source>API: {address}</source>
        <translation>API：{address}</translation>
    </message>
    <message>
        <source>Other programs can queue jobs here with the token from Settings; see /docs</source>
        <translation>其他程序可以用设置中的令牌在这里排队任务；见 /docs</translation>
    </message>
    <message>
        <source>API stopped (exit {code}; see logs/server.log)</source>
        <translation>API 已停止（退出码 {code}；见 logs/server.log）</translation>
    </message>
</context>
<context>
    <name>Banner</name>
    <message>
        <source>Dismiss</source>
        <translation>关闭</translation>
    </message>
</context>
<context>
    <name>Cause</name>
    <message>
        <source>out of memory</source>
        <translation>内存不足</translation>
    </message>
    <message>
        <source>model load</source>
        <translation>模型加载</translation>
    </message>
    <message>
        <source>other error</source>
        <translation>其他错误</translation>
    </message>
    <message>
        <source>worker lost</source>
        <translation>工作进程丢失</translation>
    </message>
    <message>
        <source>user cancelled</source>
        <translation>用户取消</translation>
    </message>
</context>
<context>
    <name>ClipPlayer</name>
    <message>
        <source>Loop</source>
        <translation>循环</translation>
    </message>
    <message>
        <source>Start again at the end</source>
        <translation>播放到结尾后从头再来</translation>
    </message>
    <message>
        <source>Cannot play the clip: {error}</source>
        <translation>无法播放该片段：{error}</translation>
    </message>
    <message>
        <source>Pause (Space)</source>
        <translation>暂停（空格）</translation>
    </message>
    <message>
        <source>Play (Space)</source>
        <translation>播放（空格）</translation>
    </message>
    <message>
        <source>{k}/{n} · {at:.1f}/{length:.1f} s</source>
        <translation>{k}/{n} · {at:.1f}/{length:.1f} 秒</translation>
    </message>
    <message>
        <source>Frame {k} of {n}, {at:.1f} s of {length:.1f} s</source>
        <translation>第 {k} 帧，共 {n} 帧；{at:.1f} 秒，共 {length:.1f} 秒</translation>
    </message>
</context>
<context>
    <name>Clock</name>
    <message>
        <source>%b %d %H:%M</source>
        <translation>%m月%d日 %H:%M</translation>
    </message>
</context>
<context>
    <name>DetailController</name>
    <message>
        <source>Select a job, or type a prompt and press Ctrl+Enter</source>
        <translation>选择一个任务，或输入提示词后按 Ctrl+Enter</translation>
    </message>
    <message>
        <source>Could not open the image: {error}</source>
        <translation>无法打开图像：{error}</translation>
    </message>
    <message>
        <source>{caption} · last preview</source>
        <translation>{caption} · 最后一次预览</translation>
    </message>
    <message>
        <source>The image file is missing or unreadable: {path}</source>
        <translation>图像文件丢失或无法读取：{path}</translation>
    </message>
    <message>
        <source>No image to show</source>
        <translation>没有可显示的图像</translation>
    </message>
    <message>
        <source>Job {id} · preview · step {step}/{total}</source>
        <translation>任务 {id} · 预览 · 第 {step}/{total} 步</translation>
    </message>
    <message>
        <source>Job {id} · preview</source>
        <translation>任务 {id} · 预览</translation>
    </message>
    <message>
        <source>{frames} frames at {fps} fps</source>
        <translation>{frames} 帧，每秒 {fps} 帧</translation>
    </message>
    <message>
        <source>{prompt}  —  {size} · seed {seed} · {sampler} · {steps} steps</source>
        <translation>{prompt}  —  {size} · 种子 {seed} · {sampler} · {steps} 步</translation>
    </message>
    <message>
        <source>Job {id} is being cancelled.
Undo (in the banner or the list) keeps it.</source>
        <translation>任务 {id} 正在被取消。
点“撤销”（横幅或列表中）可保留它。</translation>
    </message>
    <message>
        <source>Job {id}: {status}
{error}</source>
        <translation>任务 {id}：{status}
{error}</translation>
    </message>
    <message>
        <source>Job {id} is paused at step {step}.
Resume continues from there.</source>
        <translation>任务 {id} 暂停于第 {step} 步。
点击继续即可从这里接着生成。</translation>
    </message>
    <message>
        <source>Job {id} is waiting for a worker</source>
        <translation>任务 {id} 正在等待工作进程</translation>
    </message>
    <message>
        <source>Job {id} was cancelled at step {step}</source>
        <translation>任务 {id} 在第 {step} 步被取消</translation>
    </message>
    <message>
        <source>Job {id}: {status}</source>
        <translation>任务 {id}：{status}</translation>
    </message>
    <message>
        <source>Job {id} builds on another job&apos;s image:
{why}</source>
        <translation>任务 {id} 基于另一个任务的图像：
{why}</translation>
    </message>
</context>
<context>
    <name>Duration</name>
    <message>
        <source>{n} s</source>
        <translation>{n} 秒</translation>
    </message>
    <message>
        <source>{n} min</source>
        <translation>{n} 分钟</translation>
    </message>
    <message>
        <source>{n} h</source>
        <translation>{n} 小时</translation>
    </message>
</context>
<context>
    <name>EditDialog</name>
    <message>
        <source>Edit with words</source>
        <translation>用文字编辑</translation>
    </message>
    <message>
        <source>What to change, e.g. “make it night”</source>
        <translation>要修改什么，例如“改成夜晚”</translation>
    </message>
    <message>
        <source>After</source>
        <translation>之后</translation>
    </message>
    <message>
        <source>Edit</source>
        <translation>编辑</translation>
    </message>
    <message>
        <source>Close</source>
        <translation>关闭</translation>
    </message>
    <message>
        <source>Add image…</source>
        <translation>添加图片…</translation>
    </message>
    <message>
        <source>Paste image</source>
        <translation>粘贴图片</translation>
    </message>
    <message>
        <source>Remove</source>
        <translation>移除</translation>
    </message>
    <message>
        <source>Input images, in order (the first is edited)</source>
        <translation>输入图片（按顺序，第一张为被编辑的图片）</translation>
    </message>
    <message>
        <source>Instruction</source>
        <translation>指令</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>Steps</source>
        <translation>步数</translation>
    </message>
    <message>
        <source>CFG</source>
        <translation>CFG</translation>
    </message>
    <message>
        <source>No model that edits is installed: put a {families} model folder (a diffusers folder from Hugging Face, such as FLUX.1-Kontext-dev) in the models folder.</source>
        <translation>没有安装可编辑图片的模型：请将 {families} 模型文件夹（来自 Hugging Face 的 diffusers 文件夹，例如 FLUX.1-Kontext-dev）放入模型文件夹。</translation>
    </message>
    <message>
        <source>Queuing the edit…</source>
        <translation>正在排队编辑…</translation>
    </message>
    <message>
        <source>Add an input image</source>
        <translation>添加输入图片</translation>
    </message>
    <message>
        <source>{count} of at most {limit}</source>
        <translation>{count} / 最多 {limit}</translation>
    </message>
    <message>
        <source>Edit queued as job {id}</source>
        <translation>编辑已作为任务 {id} 排队</translation>
    </message>
    <message>
        <source>The edit is ready</source>
        <translation>编辑已完成</translation>
    </message>
    <message>
        <source>Before</source>
        <translation>之前</translation>
    </message>
    <message>
        <source>The picture appears once its job has finished</source>
        <translation>任务完成后将显示图片</translation>
    </message>
    <message>
        <source>Job {id}: {prompt}</source>
        <translation>任务 {id}：{prompt}</translation>
    </message>
    <message>
        <source>Edit a picture with words</source>
        <translation>用文字编辑图片</translation>
    </message>
    <message>
        <source>{path} is not an image that can be read</source>
        <translation>{path} 不是可读取的图片</translation>
    </message>
    <message>
        <source>The clipboard holds no picture</source>
        <translation>剪贴板中没有图片</translation>
    </message>
    <message>
        <source>A pasted picture</source>
        <translation>粘贴的图片</translation>
    </message>
    <message>
        <source>Edit with &amp;words…</source>
        <translation>用文字编辑(&amp;W)…</translation>
    </message>
    <message>
        <source>Edit a pasted picture with words</source>
        <translation>用文字编辑粘贴的图片</translation>
    </message>
</context>
<context>
    <name>Filter</name>
    <message>
        <source>All</source>
        <translation>全部</translation>
    </message>
    <message>
        <source>Active</source>
        <translation>进行中</translation>
    </message>
    <message>
        <source>Done</source>
        <translation>已完成</translation>
    </message>
    <message>
        <source>Failed</source>
        <translation>失败</translation>
    </message>
    <message>
        <source>Starred</source>
        <translation>已加星标</translation>
    </message>
</context>
<context>
    <name>GalleryDeleting</name>
    <message>
        <source>Undo</source>
        <translation>撤销</translation>
    </message>
    <message>
        <source>Deleting the image of job #{id} and its job · Undo within {s} s</source>
        <translation>正在删除任务 #{id} 的图像及该任务 · {s} 秒内可撤销</translation>
    </message>
    <message>
        <source>Deleting {n} images and their jobs · Undo within {s} s</source>
        <translation>正在删除 {n} 张图像及其任务 · {s} 秒内可撤销</translation>
    </message>
    <message>
        <source>Could not delete: {error}</source>
        <translation>无法删除：{error}</translation>
    </message>
</context>
<context>
    <name>GalleryView</name>
    <message>
        <source>Finished images collect here</source>
        <translation>完成的图像会汇集在这里</translation>
    </message>
    <message>
        <source>Delete image and job</source>
        <translation>删除图像和任务</translation>
    </message>
</context>
<context>
    <name>Groups</name>
    <message>
        <source>&amp;Groups</source>
        <translation>分组(&amp;G)</translation>
    </message>
    <message>
        <source>X/Y/Z &amp;plot…</source>
        <translation>X/Y/Z 图表(&amp;P)…</translation>
    </message>
    <message>
        <source>&amp;Pause the selected job&apos;s group</source>
        <translation>暂停所选任务的整组(&amp;P)</translation>
    </message>
    <message>
        <source>&amp;Resume the selected job&apos;s group</source>
        <translation>继续所选任务的整组(&amp;R)</translation>
    </message>
    <message>
        <source>&amp;Cancel the selected job&apos;s group</source>
        <translation>取消所选任务的整组(&amp;C)</translation>
    </message>
    <message>
        <source>Re&amp;try the selected job&apos;s group</source>
        <translation>重试所选任务的整组(&amp;T)</translation>
    </message>
    <message>
        <source>Select a job of a batch or grid first</source>
        <translation>请先选择批次或网格中的一个任务</translation>
    </message>
    <message>
        <source>X/Y/Z plot</source>
        <translation>X/Y/Z 图表</translation>
    </message>
    <message>
        <source>Prompt</source>
        <translation>提示词</translation>
    </message>
    <message>
        <source>(none)</source>
        <translation>（无）</translation>
    </message>
    <message>
        <source>values, separated by commas</source>
        <translation>取值，用逗号分隔</translation>
    </message>
    <message>
        <source>{axis} axis</source>
        <translation>{axis} 轴</translation>
    </message>
    <message>
        <source>Queue the grid</source>
        <translation>加入网格任务</translation>
    </message>
    <message>
        <source>{cells} cell jobs and one grid job</source>
        <translation>{cells} 个格子任务和一个网格任务</translation>
    </message>
    <message>
        <source>Choose an X axis and its values</source>
        <translation>请选择 X 轴及其取值</translation>
    </message>
</context>
<context>
    <name>GuidanceSection</name>
    <message>
        <source>none (a control image)</source>
        <translation>无（已是控制图）</translation>
    </message>
    <message>
        <source>canny edges</source>
        <translation>Canny 边缘</translation>
    </message>
    <message>
        <source>soft edges</source>
        <translation>柔和边缘</translation>
    </message>
    <message>
        <source>lineart (a drawing)</source>
        <translation>线稿（来自绘画）</translation>
    </message>
    <message>
        <source>scribble (a sketch)</source>
        <translation>涂鸦（来自草图）</translation>
    </message>
    <message>
        <source>Use this layer</source>
        <translation>使用此图层</translation>
    </message>
    <message>
        <source>type: from the preprocessor</source>
        <translation>类型：按预处理</translation>
    </message>
    <message>
        <source>type: {name}</source>
        <translation>类型：{name}</translation>
    </message>
    <message>
        <source>The control type a ControlNet Union is told</source>
        <translation>告诉 ControlNet Union 的控制类型</translation>
    </message>
    <message>
        <source>Weight</source>
        <translation>权重</translation>
    </message>
    <message>
        <source>Start</source>
        <translation>开始</translation>
    </message>
    <message>
        <source>End</source>
        <translation>结束</translation>
    </message>
    <message>
        <source>How strongly it guides (0-2)</source>
        <translation>引导的强度（0–2）</translation>
    </message>
    <message>
        <source>Start: the share of steps before it acts</source>
        <translation>开始：它起作用前经过的步数比例</translation>
    </message>
    <message>
        <source>End: the share of steps it acts until</source>
        <translation>结束：它起作用到的步数比例</translation>
    </message>
    <message>
        <source>Remove</source>
        <translation>移除</translation>
    </message>
    <message>
        <source>Move up</source>
        <translation>上移</translation>
    </message>
    <message>
        <source>drop its image here</source>
        <translation>将其图像拖放到此处</translation>
    </message>
    <message>
        <source>Add…</source>
        <translation>添加…</translation>
    </message>
    <message>
        <source>Add an image from a file (or drop or paste one here)</source>
        <translation>从文件添加图像（或拖放、粘贴到此处）</translation>
    </message>
    <message>
        <source>Paste</source>
        <translation>粘贴</translation>
    </message>
    <message>
        <source>The clipboard holds no image</source>
        <translation>剪贴板中没有图像</translation>
    </message>
    <message>
        <source>Add an image</source>
        <translation>添加图像</translation>
    </message>
    <message>
        <source>Control layers (ControlNet)</source>
        <translation>控制图层（ControlNet）</translation>
    </message>
    <message>
        <source>Reference images (IP-Adapter, Flux.1 Redux)</source>
        <translation>参考图像（IP-Adapter、Flux.1 Redux）</translation>
    </message>
    <message>
        <source>Control</source>
        <translation>控制</translation>
    </message>
    <message>
        <source>Result</source>
        <translation>结果</translation>
    </message>
    <message>
        <source>Add the selected job&apos;s image</source>
        <translation>添加所选任务的图像</translation>
    </message>
    <message>
        <source>Select a finished job first</source>
        <translation>请先选择一个已完成的任务</translation>
    </message>
    <message>
        <source>Not queued: {error}</source>
        <translation>未加入队列：{error}</translation>
    </message>
</context>
<context>
    <name>ImageCanvas</name>
    <message>
        <source>Double-click to open the viewer (zoom, previous/next)</source>
        <translation>双击打开查看器（缩放、上一张/下一张）</translation>
    </message>
    <message>
        <source>Your images will appear here</source>
        <translation>生成的图像将显示在这里</translation>
    </message>
</context>
<context>
    <name>ImagePanel</name>
    <message>
        <source>Copy image</source>
        <translation>复制图像</translation>
    </message>
    <message>
        <source>Reuse settings</source>
        <translation>复用设置</translation>
    </message>
    <message>
        <source>Put this job&apos;s prompt and settings into the form</source>
        <translation>把此任务的提示词和设置填入表单</translation>
    </message>
    <message>
        <source>Reuse seed</source>
        <translation>复用种子</translation>
    </message>
    <message>
        <source>Put only this image&apos;s seed into the form, fixed</source>
        <translation>只把这张图的种子填入表单（固定）</translation>
    </message>
    <message>
        <source>Pixels</source>
        <translation>像素</translation>
    </message>
    <message>
        <source>Enlarge small images pixel by pixel instead of smoothly</source>
        <translation>按像素放大小图，而不是平滑缩放</translation>
    </message>
    <message>
        <source>Save as GIF…</source>
        <translation>另存为 GIF…</translation>
    </message>
    <message>
        <source>The clip as an animated GIF, looping, at its speed</source>
        <translation>将片段存为循环播放的 GIF 动画，速度不变</translation>
    </message>
    <message>
        <source>Save as WebP…</source>
        <translation>另存为 WebP…</translation>
    </message>
    <message>
        <source>The clip as an animated WebP: smaller than a GIF, every colour</source>
        <translation>将片段存为 WebP 动画：比 GIF 小，保留所有颜色</translation>
    </message>
    <message>
        <source>Use frame as init image</source>
        <translation>将此帧用作初始图像</translation>
    </message>
    <message>
        <source>Start a new picture from the frame shown (image to image)</source>
        <translation>以当前显示的帧开始一张新图（图生图）</translation>
    </message>
    <message>
        <source>More</source>
        <translation>更多</translation>
    </message>
    <message>
        <source>Reuse the seed, copy the image, show it pixel by pixel</source>
        <translation>复用种子、复制图像、按像素显示</translation>
    </message>
    <message>
        <source>Pause</source>
        <translation>暂停</translation>
    </message>
    <message>
        <source>Play</source>
        <translation>播放</translation>
    </message>
    <message>
        <source>Copy frame</source>
        <translation>复制此帧</translation>
    </message>
    <message>
        <source>Image copied</source>
        <translation>图像已复制</translation>
    </message>
</context>
<context>
    <name>ImageViewer</name>
    <message>
        <source>Image</source>
        <translation>图像</translation>
    </message>
    <message>
        <source>‹ Previous</source>
        <translation>‹ 上一张</translation>
    </message>
    <message>
        <source>Next ›</source>
        <translation>下一张 ›</translation>
    </message>
    <message>
        <source>Fit</source>
        <translation>适应窗口</translation>
    </message>
    <message>
        <source>Copy</source>
        <translation>复制</translation>
    </message>
    <message>
        <source>Show in folder</source>
        <translation>在文件夹中显示</translation>
    </message>
    <message>
        <source>Open file</source>
        <translation>打开文件</translation>
    </message>
    <message>
        <source>Compare</source>
        <translation>对比</translation>
    </message>
    <message>
        <source>Keep this image on the left and go through the others beside it (C)</source>
        <translation>把这张图固定在左边，在旁边浏览其他图像（C）</translation>
    </message>
    <message>
        <source>The image file is missing or unreadable:
{path}</source>
        <translation>图像文件丢失或无法读取：
{path}</translation>
    </message>
    <message>
        <source>No settings in this file</source>
        <translation>此文件中没有生成设置</translation>
    </message>
    <message>
        <source>fit {zoom}</source>
        <translation>适应窗口 {zoom}</translation>
    </message>
    <message>
        <source>zoom {zoom}</source>
        <translation>缩放 {zoom}</translation>
    </message>
    <message>
        <source>{n} of {count}</source>
        <translation>第 {n} 张，共 {count} 张</translation>
    </message>
    <message>
        <source>Could not open {path}</source>
        <translation>无法打开 {path}</translation>
    </message>
</context>
<context>
    <name>JobList</name>
    <message>
        <source>Prompt</source>
        <translation>提示词</translation>
    </message>
    <message>
        <source>Status</source>
        <translation>状态</translation>
    </message>
    <message>
        <source>Progress</source>
        <translation>进度</translation>
    </message>
    <message>
        <source>Attempt</source>
        <translation>尝试</translation>
    </message>
    <message>
        <source>Created</source>
        <translation>创建时间</translation>
    </message>
    <message>
        <source>Duration</source>
        <translation>用时</translation>
    </message>
    <message>
        <source>seed {seed}</source>
        <translation>种子 {seed}</translation>
    </message>
    <message>
        <source>on {machine}</source>
        <translation>在 {machine}</translation>
    </message>
    <message>
        <source>priority {n}</source>
        <translation>优先级 {n}</translation>
    </message>
    <message>
        <source>re-run of #{id}</source>
        <translation>重新生成自 #{id}</translation>
    </message>
    <message>
        <source>{model} · loaded</source>
        <translation>{model} · 已加载</translation>
    </message>
    <message>
        <source>{model} · needs loading</source>
        <translation>{model} · 需要加载</translation>
    </message>
    <message>
        <source>{model} · needs loading (~{time})</source>
        <translation>{model} · 需要加载（约 {time}）</translation>
    </message>
    <message>
        <source>group {group}, its grid</source>
        <translation>第 {group} 组的网格</translation>
    </message>
    <message>
        <source>group {group}, cell {cell}</source>
        <translation>第 {group} 组，第 {cell} 格</translation>
    </message>
    <message>
        <source>{model} · {sampler} · {steps} steps · CFG {cfg} · seed {seed} · {size}</source>
        <translation>{model} · {sampler} · {steps} 步 · CFG {cfg} · 种子 {seed} · {size}</translation>
    </message>
    <message>
        <source>Job {id}: {status}</source>
        <translation>任务 {id}：{status}</translation>
    </message>
    <message>
        <source>Created {at} · attempt {n} of {most}</source>
        <translation>创建于 {at} · 第 {n} 次尝试（共 {most} 次）</translation>
    </message>
    <message>
        <source>From an image at strength {s}: {run} of its {steps} steps run</source>
        <translation>从图像开始，重绘强度 {s}：运行其 {steps} 步中的 {run} 步</translation>
    </message>
    <message>
        <source>Last run on {machine}</source>
        <translation>上次在 {machine} 上运行</translation>
    </message>
    <message>
        <source>Last run on this computer ({machine})</source>
        <translation>上次在本机（{machine}）上运行</translation>
    </message>
    <message>
        <source>Error: {error}</source>
        <translation>错误：{error}</translation>
    </message>
    <message>
        <source>Re-run of job {id}</source>
        <translation>重新生成自任务 {id}</translation>
    </message>
    <message>
        <source>Queued jobs are listed by priority, then age. A worker that has a job&apos;s model loaded takes that job first, passing others over only a few times, so a model is not reloaded for every job.</source>
        <translation>排队的任务按优先级、再按排队先后列出。已加载某任务所需模型的工作进程会先取该任务（其他任务最多被越过几次），这样不必为每个任务重新加载模型。</translation>
    </message>
    <message>
        <source>after #{id}</source>
        <translation>接在 #{id} 之后</translation>
    </message>
    <message>
        <source>Built on the image of job {id}</source>
        <translation>基于任务 {id} 的图像</translation>
    </message>
</context>
<context>
    <name>JobsPanel</name>
    <message>
        <source>No jobs here yet. Type a prompt and press Ctrl+Enter.</source>
        <translation>这里还没有任务。输入提示词后按 Ctrl+Enter。</translation>
    </message>
    <message>
        <source>Search prompts (Ctrl+F): red circle, -blue, cat*</source>
        <translation>搜索提示词（Ctrl+F）：红 圆、-蓝、猫*</translation>
    </message>
    <message>
        <source>Remove the star</source>
        <translation>取消收藏</translation>
    </message>
</context>
<context>
    <name>JobsViewModel</name>
    <message>
        <source>Could not read the job list: {error}</source>
        <translation>无法读取任务列表：{error}</translation>
    </message>
    <message>
        <source>Could not read more jobs: {error}</source>
        <translation>无法读取更多任务：{error}</translation>
    </message>
    <message>
        <source>Request failed: {error}</source>
        <translation>请求失败：{error}</translation>
    </message>
</context>
<context>
    <name>LaneView</name>
    <message>
        <source>Select a job to see its timeline</source>
        <translation>选择一个任务以查看其时间线</translation>
    </message>
</context>
<context>
    <name>LastFrameRow</name>
    <message>
        <source>Choose the clip&apos;s last frame</source>
        <translation>选择片段的最后一帧</translation>
    </message>
    <message>
        <source>Images (*.png *.jpg *.jpeg *.webp *.bmp)</source>
        <translation>图像 (*.png *.jpg *.jpeg *.webp *.bmp)</translation>
    </message>
    <message>
        <source>Last frame…</source>
        <translation>最后一帧…</translation>
    </message>
    <message>
        <source>The clip&apos;s last frame: the model draws the frames between the init image and this one</source>
        <translation>片段的最后一帧：模型绘制从初始图像到这张图像之间的帧</translation>
    </message>
    <message>
        <source>Remove</source>
        <translation>移除</translation>
    </message>
    <message>
        <source>End the clip where the model takes it, without this image</source>
        <translation>不用这张图像，由模型决定片段的结尾</translation>
    </message>
    <message>
        <source>How firmly the clip holds this frame: 1 exactly, lower lets it move away</source>
        <translation>片段对这一帧的保持程度：1 为完全保持，越低越允许偏离</translation>
    </message>
    <message>
        <source>Last frame strength</source>
        <translation>末帧强度</translation>
    </message>
    <message>
        <source>at frame</source>
        <translation>位于帧</translation>
    </message>
    <message>
        <source>The frame this image is, counted from 0 (blank: the clip&apos;s last)</source>
        <translation>这张图片所在的帧，从 0 开始计数（留空：片段的最后一帧）</translation>
    </message>
    <message>
        <source>Ends on {source} ({w} × {h})</source>
        <translation>结束于 {source}（{w} × {h}）</translation>
    </message>
    <message>
        <source>No last frame: the model ends the clip as it goes</source>
        <translation>无最后一帧：由模型自行结束片段</translation>
    </message>
</context>
<context>
    <name>Launch</name>
    <message>
        <source>Another program holds the job database&apos;s write lock. Easel settles the last session&apos;s jobs and starts its workers as soon as it is free.</source>
        <translation>另一个程序占用着任务数据库的写锁。锁一释放，Easel 就会处理上次会话留下的任务并启动工作进程。</translation>
    </message>
    <message>
        <source>Easel could not open its job store: {error}</source>
        <translation>Easel 无法打开任务库：{error}</translation>
    </message>
    <message>
        <source>Change or clear the shared queue in Settings, then restart Easel.</source>
        <translation>请在“设置”中修改或清空共享队列，然后重新启动 Easel。</translation>
    </message>
    <message>
        <source>The data folder {folder} is read-only: your jobs are shown, but nothing can be queued or changed, and no worker runs.</source>
        <translation>数据文件夹 {folder} 是只读的：可以查看任务，但不能排队或更改任何内容，也不会运行工作进程。</translation>
    </message>
    <message>
        <source>Something went wrong: {error}. Details are in {log}</source>
        <translation>出错了：{error}。详情见 {log}</translation>
    </message>
    <message>
        <source>Easel cannot write its job store for now ({error}). It settles the last session&apos;s jobs and starts its workers as soon as it can.</source>
        <translation>Easel 暂时无法写入任务库（{error}）。一旦可以写入，Easel 就会处理上次会话留下的任务并启动工作进程。</translation>
    </message>
    <message>
        <source>Could not check the last session&apos;s jobs: {error}</source>
        <translation>无法检查上次会话的任务：{error}</translation>
    </message>
</context>
<context>
    <name>MainWindow</name>
    <message>
        <source>&amp;Settings…</source>
        <translation>设置(&amp;S)…</translation>
    </message>
    <message>
        <source>&amp;Quit</source>
        <translation>退出(&amp;Q)</translation>
    </message>
    <message>
        <source>&amp;About Easel</source>
        <translation>关于 Easel(&amp;A)</translation>
    </message>
    <message>
        <source>&amp;Workers…</source>
        <translation>工作进程(&amp;W)…</translation>
    </message>
    <message>
        <source>Open &amp;models folder</source>
        <translation>打开模型文件夹(&amp;M)</translation>
    </message>
    <message>
        <source>&amp;Help</source>
        <translation>帮助(&amp;H)</translation>
    </message>
    <message>
        <source>&amp;Keyboard shortcuts</source>
        <translation>键盘快捷键(&amp;K)</translation>
    </message>
    <message>
        <source>About Easel</source>
        <translation>关于 Easel</translation>
    </message>
    <message>
        <source>Could not remove old finished jobs: {error}</source>
        <translation>无法删除旧的已完成任务：{error}</translation>
    </message>
    <message>
        <source>Not queued: {error}</source>
        <translation>未加入队列：{error}</translation>
    </message>
    <message>
        <source>Type a prompt first</source>
        <translation>请先输入提示词</translation>
    </message>
    <message>
        <source>No workers: images cannot be generated</source>
        <translation>没有工作进程：无法生成图像</translation>
    </message>
    <message>
        <source>Could not make the models folder {folder}: {error}</source>
        <translation>无法创建模型文件夹 {folder}：{error}</translation>
    </message>
    <message>
        <source>Could not open {folder}</source>
        <translation>无法打开 {folder}</translation>
    </message>
    <message>
        <source>Models go in {folder}, LoRAs in its lora folder</source>
        <translation>模型放在 {folder}，LoRA 放在其中的 lora 文件夹</translation>
    </message>
    <message>
        <source>Job {id} has no image yet</source>
        <translation>任务 {id} 还没有图像</translation>
    </message>
    <message>
        <source>Settings of job {id} are in the form</source>
        <translation>任务 {id} 的设置已填入表单</translation>
    </message>
    <message>
        <source>Cancelled {jobs}</source>
        <translation>已取消：{jobs}</translation>
    </message>
    <message>
        <source>{jobs} will be cancelled in {n} s</source>
        <translation>{jobs}将在 {n} 秒后取消</translation>
    </message>
    <message>
        <source>Undo</source>
        <translation>撤销</translation>
    </message>
    <message>
        <source>Kept {jobs}</source>
        <translation>已保留 {jobs}</translation>
    </message>
    <message>
        <source>Resumed {jobs} paused when Easel last closed</source>
        <translation>已继续上次关闭 Easel 时暂停的 {jobs}</translation>
    </message>
    <message>
        <source>Resume all</source>
        <translation>全部继续</translation>
    </message>
    <message>
        <source>Show</source>
        <translation>查看</translation>
    </message>
    <message>
        <source>Dismiss</source>
        <translation>知道了</translation>
    </message>
    <message>
        <source>{jobs} paused when Easel closed: they continue when you resume</source>
        <translation>关闭 Easel 时暂停了 {jobs}：继续后会从停下的地方接着生成</translation>
    </message>
    <message>
        <source>Open log</source>
        <translation>打开日志</translation>
    </message>
    <message>
        <source>Settings saved</source>
        <translation>设置已保存</translation>
    </message>
    <message>
        <source>Pausing running jobs…</source>
        <translation>正在暂停运行中的任务…</translation>
    </message>
    <message>
        <source>1 job</source>
        <translation>1 个任务</translation>
    </message>
    <message>
        <source>{n} jobs</source>
        <translation>{n} 个任务</translation>
    </message>
    <message>
        <source>1 job paused when Easel closed: it continues when you resume</source>
        <translation>1 个任务在 Easel 关闭时已暂停：继续后将接着生成</translation>
    </message>
    <message>
        <source>No jobs needed restoring.</source>
        <translation>没有需要恢复的任务。</translation>
    </message>
    <message>
        <source>Easel did not close cleanly last time (it crashed).</source>
        <translation>Easel 上次没有正常关闭（程序崩溃）。</translation>
    </message>
    <message>
        <source>Easel did not close cleanly last time (it was killed or the computer stopped).</source>
        <translation>Easel 上次没有正常关闭（被强行结束或电脑意外停止）。</translation>
    </message>
    <message>
        <source>job {id} stops after its current step, its progress is discarded</source>
        <translation>任务 {id} 在当前步骤后停止，进度将被丢弃</translation>
    </message>
    <message>
        <source>Version</source>
        <translation>版本</translation>
    </message>
    <message>
        <source>Data folder</source>
        <translation>数据文件夹</translation>
    </message>
    <message>
        <source>Database</source>
        <translation>数据库</translation>
    </message>
    <message>
        <source>Device</source>
        <translation>设备</translation>
    </message>
    <message>
        <source>known once a worker is ready</source>
        <translation>工作进程就绪后显示</translation>
    </message>
    <message>
        <source>Logs</source>
        <translation>日志</translation>
    </message>
    <message>
        <source>Local image generation where no job ever vanishes.</source>
        <translation>本地图像生成，任务永不丢失。</translation>
    </message>
    <message>
        <source>&amp;View</source>
        <translation>视图(&amp;V)</translation>
    </message>
    <message>
        <source>&amp;Search jobs</source>
        <translation>搜索任务(&amp;S)</translation>
    </message>
    <message>
        <source>S&amp;tatistics…</source>
        <translation>统计(&amp;T)…</translation>
    </message>
    <message>
        <source>Variations of job {id}</source>
        <translation>任务 {id} 的变体</translation>
    </message>
    <message>
        <source>Strength: how much is redrawn. 0.3 stays close, 0.6 varies clearly.</source>
        <translation>重绘强度：重画多少。0.3 接近原图，0.6 变化明显。</translation>
    </message>
    <message>
        <source>How many images close to job {id}?</source>
        <translation>要生成几张与任务 {id} 相近的图像？</translation>
    </message>
    <message>
        <source>Strength</source>
        <translation>重绘强度</translation>
    </message>
    <message>
        <source>Queue</source>
        <translation>加入队列</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>取消</translation>
    </message>
    <message>
        <source>Cannot start from {name}: {error}</source>
        <translation>无法以 {name} 为起点：{error}</translation>
    </message>
    <message>
        <source>{queued} queued, about {eta}</source>
        <translation>排队中 {queued}，约需 {eta}</translation>
    </message>
    <message>
        <source>{queued} queued</source>
        <translation>排队中 {queued}</translation>
    </message>
    <message>
        <source>{running} running · {waiting} · {jobs}</source>
        <translation>运行中 {running} · {waiting} · 共 {jobs}</translation>
    </message>
    <message>
        <source>Save the clip as {kind}</source>
        <translation>将片段另存为 {kind}</translation>
    </message>
    <message>
        <source>{kind} animation (*{suffix})</source>
        <translation>{kind} 动画 (*{suffix})</translation>
    </message>
    <message>
        <source>Saving {name}…</source>
        <translation>正在保存 {name}…</translation>
    </message>
    <message>
        <source>Could not save {name}: {error}</source>
        <translation>无法保存 {name}：{error}</translation>
    </message>
    <message>
        <source>Saved {path}</source>
        <translation>已保存 {path}</translation>
    </message>
    <message>
        <source>frame {k}</source>
        <translation>第 {k} 帧</translation>
    </message>
    <message>
        <source>#{id}, frame {k}</source>
        <translation>#{id} 的第 {k} 帧</translation>
    </message>
</context>
<context>
    <name>MaskEditor</name>
    <message>
        <source>Fix part of the picture</source>
        <translation>修改图片的一部分</translation>
    </message>
    <message>
        <source>What to paint there</source>
        <translation>在那里画什么</translation>
    </message>
    <message>
        <source>Mask</source>
        <translation>蒙版</translation>
    </message>
    <message>
        <source>Brush</source>
        <translation>画笔</translation>
    </message>
    <message>
        <source>Size</source>
        <translation>大小</translation>
    </message>
    <message>
        <source>Hardness</source>
        <translation>硬度</translation>
    </message>
    <message>
        <source>Mask opacity</source>
        <translation>蒙版不透明度</translation>
    </message>
    <message>
        <source>Undo</source>
        <translation>撤销</translation>
    </message>
    <message>
        <source>Redo</source>
        <translation>重做</translation>
    </message>
    <message>
        <source>Invert</source>
        <translation>反选</translation>
    </message>
    <message>
        <source>Clear</source>
        <translation>清除</translation>
    </message>
    <message>
        <source>After</source>
        <translation>之后</translation>
    </message>
    <message>
        <source>Fit</source>
        <translation>适应窗口</translation>
    </message>
    <message>
        <source>Inpaint</source>
        <translation>局部重绘</translation>
    </message>
    <message>
        <source>Prompt</source>
        <translation>提示词</translation>
    </message>
    <message>
        <source>Only masked</source>
        <translation>仅蒙版区域</translation>
    </message>
    <message>
        <source>Denoising strength</source>
        <translation>重绘幅度</translation>
    </message>
    <message>
        <source>Mask blur</source>
        <translation>蒙版模糊</translation>
    </message>
    <message>
        <source>Masked area padding</source>
        <translation>蒙版区域边距</translation>
    </message>
    <message>
        <source>Extend canvas</source>
        <translation>扩展画布</translation>
    </message>
    <message>
        <source>Left</source>
        <translation>左</translation>
    </message>
    <message>
        <source>Right</source>
        <translation>右</translation>
    </message>
    <message>
        <source>Top</source>
        <translation>上</translation>
    </message>
    <message>
        <source>Bottom</source>
        <translation>下</translation>
    </message>
    <message>
        <source>Edge colours</source>
        <translation>边缘颜色</translation>
    </message>
    <message>
        <source>Noise</source>
        <translation>噪声</translation>
    </message>
    <message>
        <source>New area</source>
        <translation>新区域</translation>
    </message>
    <message>
        <source>Eraser</source>
        <translation>橡皮擦</translation>
    </message>
    <message>
        <source>Before</source>
        <translation>之前</translation>
    </message>
    <message>
        <source>Inpaint queued</source>
        <translation>局部重绘已加入队列</translation>
    </message>
    <message>
        <source>Extension queued</source>
        <translation>画布扩展已加入队列</translation>
    </message>
    <message>
        <source>The result is ready ({w}x{h})</source>
        <translation>结果已完成（{w}x{h}）</translation>
    </message>
    <message>
        <source>Fix part of a picture</source>
        <translation>修改图片的一部分</translation>
    </message>
    <message>
        <source>Cannot open {path}</source>
        <translation>无法打开 {path}</translation>
    </message>
    <message>
        <source>{path} is not an image that can be read</source>
        <translation>{path} 不是可读取的图片</translation>
    </message>
    <message>
        <source>The clipboard holds no picture</source>
        <translation>剪贴板中没有图片</translation>
    </message>
    <message>
        <source>&amp;Image</source>
        <translation>图片(&amp;I)</translation>
    </message>
    <message>
        <source>&amp;Fix part of the picture…</source>
        <translation>修改图片的一部分(&amp;F)…</translation>
    </message>
    <message>
        <source>Fix a &amp;pasted picture</source>
        <translation>修改粘贴的图片(&amp;P)</translation>
    </message>
</context>
<context>
    <name>ModelChoice</name>
    <message>
        <source>{name} takes at most {side} px a side</source>
        <translation>{name} 每边最多 {side} 像素</translation>
    </message>
    <message>
        <source>{name} was trained at {side} px: larger, it repeats the picture in tiles</source>
        <translation>{name} 按 {side} 像素训练：更大时画面会重复平铺</translation>
    </message>
    <message>
        <source>unsupported</source>
        <translation>不支持</translation>
    </message>
    <message>
        <source>{kind}, {size} px</source>
        <translation>{kind}，{size} 像素</translation>
    </message>
    <message>
        <source>{size} · native</source>
        <translation>{size} · 原生</translation>
    </message>
    <message>
        <source>unknown model type</source>
        <translation>未知的模型类型</translation>
    </message>
</context>
<context>
    <name>NewJobsSection</name>
    <message>
        <source>New jobs</source>
        <translation>新任务</translation>
    </message>
    <message>
        <source>the values I used last</source>
        <translation>我上次使用的值</translation>
    </message>
    <message>
        <source>these defaults</source>
        <translation>以下默认值</translation>
    </message>
    <message>
        <source>What the prompt panel shows when Easel starts; “Reset to defaults” there always uses these</source>
        <translation>Easel 启动时提示词面板显示的值；那里的“恢复默认值”始终使用这些默认值</translation>
    </message>
    <message>
        <source>Start with</source>
        <translation>开始时使用</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>Sampler</source>
        <translation>采样器</translation>
    </message>
    <message>
        <source>Steps</source>
        <translation>步数</translation>
    </message>
    <message>
        <source>Size</source>
        <translation>尺寸</translation>
    </message>
    <message>
        <source>Images</source>
        <translation>数量</translation>
    </message>
</context>
<context>
    <name>Notifier</name>
    <message>
        <source>Image ready</source>
        <translation>图像已完成</translation>
    </message>
    <message>
        <source>Job {id} failed</source>
        <translation>任务 {id} 失败</translation>
    </message>
    <message>
        <source>Job {id} timed out</source>
        <translation>任务 {id} 超时</translation>
    </message>
</context>
<context>
    <name>NumberRule</name>
    <message>
        <source>{name} is empty: type a number from {low} to {high}</source>
        <translation>{name}为空：请输入 {low} 到 {high} 之间的数</translation>
    </message>
    <message>
        <source>empty</source>
        <translation>为空</translation>
    </message>
    <message>
        <source>{name} must be a whole number, not {text}</source>
        <translation>{name}必须是整数，不能是 {text}</translation>
    </message>
    <message>
        <source>{name} must be a number, not {text}</source>
        <translation>{name}必须是数字，不能是 {text}</translation>
    </message>
    <message>
        <source>not a number</source>
        <translation>不是数字</translation>
    </message>
    <message>
        <source>{name} must be between {low} and {high}, not {value}</source>
        <translation>{name}必须在 {low} 到 {high} 之间，不能是 {value}</translation>
    </message>
    <message>
        <source>max {high}</source>
        <translation>最大 {high}</translation>
    </message>
    <message>
        <source>min {low}</source>
        <translation>最小 {low}</translation>
    </message>
    <message>
        <source>{name} takes at most {decimals} decimals, not {text}</source>
        <translation>{name}最多 {decimals} 位小数，不能是 {text}</translation>
    </message>
    <message>
        <source>{decimals} decimals max</source>
        <translation>最多 {decimals} 位小数</translation>
    </message>
    <message>
        <source>{name} must be a multiple of {multiple}, not {value}</source>
        <translation>{name}必须是 {multiple} 的倍数，不能是 {value}</translation>
    </message>
    <message>
        <source>×{multiple} only</source>
        <translation>须为 {multiple} 的倍数</translation>
    </message>
    <message>
        <source>Steps</source>
        <translation>步数</translation>
    </message>
    <message>
        <source>Width</source>
        <translation>宽度</translation>
    </message>
    <message>
        <source>Height</source>
        <translation>高度</translation>
    </message>
    <message>
        <source>Images</source>
        <translation>数量</translation>
    </message>
    <message>
        <source>Seed</source>
        <translation>种子</translation>
    </message>
    <message>
        <source>random</source>
        <translation>随机</translation>
    </message>
    <message>
        <source>Frames</source>
        <translation>帧数</translation>
    </message>
    <message>
        <source>Image strength</source>
        <translation>图像强度</translation>
    </message>
    <message>
        <source>Last frame strength</source>
        <translation>末帧强度</translation>
    </message>
    <message>
        <source>Last frame at</source>
        <translation>末帧位置</translation>
    </message>
    <message>
        <source>the end</source>
        <translation>末尾</translation>
    </message>
    <message>
        <source>FPS</source>
        <translation>帧率</translation>
    </message>
    <message>
        <source>{name} is empty</source>
        <translation>{name}为空</translation>
    </message>
    <message>
        <source>Strength</source>
        <translation>重绘强度</translation>
    </message>
</context>
<context>
    <name>PngParams</name>
    <message>
        <source>ControlNet {name} is not installed; its layer was left out</source>
        <translation>ControlNet {name} 未安装；已略去该控制层</translation>
    </message>
    <message>
        <source>{name} is not a readable image: {error}</source>
        <translation>{name} 不是可读取的图像：{error}</translation>
    </message>
    <message>
        <source>the image</source>
        <translation>该图像</translation>
    </message>
    <message>
        <source>{name} has no generation parameters (not made by Easel or A1111)</source>
        <translation>{name} 不含生成参数（不是由 Easel 或 A1111 生成的）</translation>
    </message>
    <message>
        <source>the easel parameters are not valid JSON (nested too deeply)</source>
        <translation>easel 参数不是有效的 JSON（嵌套过深）</translation>
    </message>
    <message>
        <source>the easel parameters are not valid JSON: {error}</source>
        <translation>easel 参数不是有效的 JSON：{error}</translation>
    </message>
    <message>
        <source>the easel parameters are not a JSON object</source>
        <translation>easel 参数不是 JSON 对象</translation>
    </message>
    <message>
        <source>ignored unknown field(s): {names}</source>
        <translation>已忽略未知字段：{names}</translation>
    </message>
    <message>
        <source>the reference image is not restored</source>
        <translation>参考图像未恢复</translation>
    </message>
    <message>
        <source>the edit&apos;s further input images are not in the PNG; add them again</source>
        <translation>编辑的其他输入图片不在 PNG 中；请重新添加</translation>
    </message>
    <message>
        <source>the easel parameters are incomplete: {error}</source>
        <translation>easel 参数不完整：{error}</translation>
    </message>
    <message>
        <source>the parameters text is empty</source>
        <translation>参数文本为空</translation>
    </message>
    <message>
        <source>ignored {key} (unreadable)</source>
        <translation>已忽略 {key}（无法读取）</translation>
    </message>
    <message>
        <source>ignored {key} {value} (not a number)</source>
        <translation>已忽略 {key} {value}（不是数字）</translation>
    </message>
    <message>
        <source>ignored Size {value}</source>
        <translation>已忽略尺寸 {value}</translation>
    </message>
    <message>
        <source>sampler {name} is not available; kept the default</source>
        <translation>采样器 {name} 不可用，已保留默认值</translation>
    </message>
</context>
<context>
    <name>Progress</name>
    <message>
        <source>loading the model… {s}</source>
        <translation>正在加载模型… {s}</translation>
    </message>
    <message>
        <source>step {step}/{total} · ~{eta} left</source>
        <translation>第 {step}/{total} 步 · 约剩 {eta}</translation>
    </message>
    <message>
        <source>step {step}/{total}</source>
        <translation>第 {step}/{total} 步</translation>
    </message>
    <message>
        <source>done · {total} steps</source>
        <translation>完成 · {total} 步</translation>
    </message>
    <message>
        <source>cancelling at {step}/{total}</source>
        <translation>正在取消 · {step}/{total}</translation>
    </message>
    <message>
        <source>pausing at {step}/{total}</source>
        <translation>正在暂停 · {step}/{total}</translation>
    </message>
    <message>
        <source>paused at {step}/{total}</source>
        <translation>已暂停 · {step}/{total}</translation>
    </message>
    <message>
        <source>cancelled at {step}/{total}</source>
        <translation>已取消 · {step}/{total}</translation>
    </message>
    <message>
        <source>stopped at {step}/{total}</source>
        <translation>已停止 · {step}/{total}</translation>
    </message>
    <message>
        <source>first in the queue</source>
        <translation>队列第一</translation>
    </message>
    <message>
        <source>#{n} in the queue</source>
        <translation>队列第 {n} 位</translation>
    </message>
    <message>
        <source>queued</source>
        <translation>排队中</translation>
    </message>
    <message>
        <source>being cancelled at {step}/{total} · Undo keeps it</source>
        <translation>正在取消 · {step}/{total} · 撤销可保留</translation>
    </message>
    <message>
        <source>{place} · {total} steps · about {eta}</source>
        <translation>{place} · {total} 步 · 约 {eta}</translation>
    </message>
    <message>
        <source>{place} · {total} steps</source>
        <translation>{place} · {total} 步</translation>
    </message>
    <message>
        <source>{place} · will continue from step {step}/{total}</source>
        <translation>{place} · 将从第 {step}/{total} 步继续</translation>
    </message>
    <message>
        <source>loading the model, compiling it… (once) {s}</source>
        <translation>正在加载模型并编译…（仅一次）{s}</translation>
    </message>
    <message>
        <source>waits for #{id}</source>
        <translation>等待 #{id}</translation>
    </message>
    <message>
        <source>waits for its parent jobs</source>
        <translation>等待其上游任务</translation>
    </message>
</context>
<context>
    <name>PromptPanel</name>
    <message>
        <source>Custom</source>
        <translation>自定义</translation>
    </message>
    <message>
        <source>Describe the picture… (Ctrl+Enter to generate)</source>
        <translation>描述你想要的画面…（Ctrl+Enter 生成）</translation>
    </message>
    <message>
        <source>What to keep out of it</source>
        <translation>不希望出现在画面中的内容</translation>
    </message>
    <message>
        <source>Random</source>
        <translation>随机</translation>
    </message>
    <message>
        <source>On: a new seed for every image (like -1 in A1111). Off: the seed typed here</source>
        <translation>开：每张图用新种子（同 A1111 的 -1）。关：使用这里填写的种子</translation>
    </message>
    <message>
        <source>Set the model&apos;s own size, queue the image(s) and an upscale ×2 of each</source>
        <translation>改用模型自身的尺寸，排队生成图像，并为每张排队放大 ×2</translation>
    </message>
    <message>
        <source>Generate</source>
        <translation>生成</translation>
    </message>
    <message>
        <source>Queue the image(s) — Ctrl+Enter</source>
        <translation>将图像加入队列 — Ctrl+Enter</translation>
    </message>
    <message>
        <source>Reset to defaults</source>
        <translation>恢复默认值</translation>
    </message>
    <message>
        <source>Model, sampler, steps, CFG, size and images as set in Settings &gt; New jobs</source>
        <translation>模型、采样器、步数、CFG、尺寸和数量恢复为 设置 &gt; 新任务 中的值</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>Sampler</source>
        <translation>采样器</translation>
    </message>
    <message>
        <source>Steps</source>
        <translation>步数</translation>
    </message>
    <message>
        <source>Seed</source>
        <translation>种子</translation>
    </message>
    <message>
        <source>Size</source>
        <translation>尺寸</translation>
    </message>
    <message>
        <source>Images</source>
        <translation>数量</translation>
    </message>
    <message>
        <source>Image strength</source>
        <translation>图像强度</translation>
    </message>
    <message>
        <source>Frames</source>
        <translation>帧数</translation>
    </message>
    <message>
        <source>FPS</source>
        <translation>帧率</translation>
    </message>
    <message>
        <source>Prompt</source>
        <translation>提示词</translation>
    </message>
    <message>
        <source>Negative prompt</source>
        <translation>反向提示词</translation>
    </message>
    <message>
        <source>How firmly the clip holds the init image as its first frame: 1 exactly, lower lets it move away</source>
        <translation>片段对作为首帧的初始图像的保持程度：1 为完全保持，越低越允许偏离</translation>
    </message>
    <message>
        <source>{seconds} s</source>
        <translation>{seconds} 秒</translation>
    </message>
    <message>
        <source>size {w}×{h}, the largest {model} takes in that shape</source>
        <translation>尺寸 {w}×{h}：{model} 在这个比例下能接受的最大尺寸</translation>
    </message>
    <message>
        <source>{kind} takes no negative prompt: it is not used</source>
        <translation>{kind} 不使用反向提示词：此处内容不会被使用</translation>
    </message>
    <message>
        <source>Guidance</source>
        <translation>引导</translation>
    </message>
    <message>
        <source>The model&apos;s distilled guidance (Flux: about 3.5), not classifier-free guidance</source>
        <translation>模型的蒸馏引导（Flux：约 3.5），不是无分类器引导（CFG）</translation>
    </message>
    <message>
        <source>{label} {n}-step model: {steps} steps, CFG {cfg}, {sampler} with its own timesteps</source>
        <translation>{label} {n} 步模型：{steps} 步，CFG {cfg}，{sampler}（使用其自带的时间步）</translation>
    </message>
    <message>
        <source>{label} {n}-step LoRA: {steps} steps, CFG {cfg}, {sampler} with its own schedule</source>
        <translation>{label} {n} 步 LoRA：{steps} 步，CFG {cfg}，{sampler}，使用其自带的调度</translation>
    </message>
    <message>
        <source>{label} {n}-step LoRA: {steps} steps, CFG {cfg}, {sampler}</source>
        <translation>{label} {n} 步 LoRA：{steps} 步，CFG {cfg}，{sampler}</translation>
    </message>
    <message>
        <source>Its authors use it at weight {weight}.</source>
        <translation>作者建议权重为 {weight}。</translation>
    </message>
    <message>
        <source>The job&apos;s own schedule (a few-step LoRA&apos;s or model&apos;s)</source>
        <translation>任务自带的调度（少步 LoRA 或模型的）</translation>
    </message>
    <message>
        <source>The defaults of Settings &gt; New jobs are in the form</source>
        <translation>设置 &gt; 新任务 中的默认值已填入表单</translation>
    </message>
    <message>
        <source>Generate {n} images</source>
        <translation>生成 {n} 张图像</translation>
    </message>
    <message>
        <source>Seed {seed} in the form</source>
        <translation>种子 {seed} 已填入表单</translation>
    </message>
    <message>
        <source>Generate at {w}×{h}, then upscale</source>
        <translation>以 {w}×{h} 生成，再放大</translation>
    </message>
    <message>
        <source>Settings from {name}</source>
        <translation>已读取 {name} 的设置</translation>
    </message>
    <message>
        <source>Insert a LoRA from the models folder&apos;s lora/ subfolder at the cursor</source>
        <translation>在光标处插入模型文件夹 lora/ 子文件夹中的 LoRA</translation>
    </message>
    <message>
        <source>Generate + upscale ×2</source>
        <translation>生成并放大 ×2</translation>
    </message>
    <message>
        <source>Queue the image(s) and, waiting for each, its upscale ×2</source>
        <translation>将图像加入队列，并为每张图排队等待中的放大 ×2</translation>
    </message>
    <message>
        <source>LoRA</source>
        <translation>LoRA</translation>
    </message>
    <message>
        <source>Strength</source>
        <translation>重绘强度</translation>
    </message>
    <message>
        <source>Drop an Easel or A1111 PNG here to reuse its settings; drop or paste any other image to start from it</source>
        <translation>把 Easel 或 A1111 生成的 PNG 拖到这里可复用其设置；拖入或粘贴其他图像则以它为起点</translation>
    </message>
    <message>
        <source>Remove</source>
        <translation>移除</translation>
    </message>
    <message>
        <source>Generate from noise again, without this image</source>
        <translation>不用这张图像，重新从噪声生成</translation>
    </message>
    <message>
        <source>Starts from {source} ({w} × {h})</source>
        <translation>以 {source} 为起点（{w} × {h}）</translation>
    </message>
    <message>
        <source>Init image from {source}</source>
        <translation>初始图像来自 {source}</translation>
    </message>
    <message>
        <source>the clipboard</source>
        <translation>剪贴板</translation>
    </message>
    <message>
        <source>Add a LoRA…</source>
        <translation>添加 LoRA…</translation>
    </message>
    <message>
        <source>No LoRA files in the models folder</source>
        <translation>模型文件夹中没有 LoRA 文件</translation>
    </message>
</context>
<context>
    <name>Prune</name>
    <message>
        <source>1 finished job</source>
        <translation>1 个已完成的任务</translation>
    </message>
    <message>
        <source>{n} finished jobs</source>
        <translation>{n} 个已完成的任务</translation>
    </message>
    <message>
        <source>older than a day</source>
        <translation>超过 1 天</translation>
    </message>
    <message>
        <source>older than {days} days</source>
        <translation>超过 {days} 天</translation>
    </message>
    <message>
        <source>beyond the newest {keep}</source>
        <translation>最新 {keep} 个之外</translation>
    </message>
    <message>
        <source>{older} or {beyond}</source>
        <translation>{older}或{beyond}</translation>
    </message>
    <message>
        <source>Removed {jobs} {why}; freed {size}</source>
        <translation>已删除{why}的 {jobs}；释放了 {size}</translation>
    </message>
</context>
<context>
    <name>QueueService</name>
    <message>
        <source>Job {id} has no image</source>
        <translation>任务 {id} 没有图像</translation>
    </message>
    <message>
        <source>Cannot read {path}: {error}</source>
        <translation>无法读取 {path}：{error}</translation>
    </message>
</context>
<context>
    <name>QuitDialog</name>
    <message>
        <source>Pause 1 running job and quit? It will continue from where it stopped next time.</source>
        <translation>暂停 1 个运行中的任务并退出？下次启动时会从停下的地方继续。</translation>
    </message>
    <message>
        <source>Pause {n} running jobs and quit? They will continue from where they stopped next time.</source>
        <translation>暂停 {n} 个运行中的任务并退出？下次启动时会从停下的地方继续。</translation>
    </message>
    <message>
        <source>Quit Easel</source>
        <translation>退出 Easel</translation>
    </message>
    <message>
        <source>Pause and quit</source>
        <translation>暂停并退出</translation>
    </message>
</context>
<context>
    <name>RestoreSummary</name>
    <message>
        <source>{n} requeued</source>
        <translation>{n} 个重新排队</translation>
    </message>
    <message>
        <source>{n} paused</source>
        <translation>{n} 个已暂停</translation>
    </message>
    <message>
        <source>{n} cancelled</source>
        <translation>{n} 个已取消</translation>
    </message>
    <message>
        <source>{n} given up</source>
        <translation>{n} 个已放弃</translation>
    </message>
    <message>
        <source>Restored jobs from the last session: {jobs}</source>
        <translation>已恢复上次会话的任务：{jobs}</translation>
    </message>
    <message>
        <source>, </source>
        <translation>，</translation>
    </message>
    <message>
        <source>The worker of 1 job paused it when the window was gone</source>
        <translation>窗口消失后，工作进程暂停了 1 个任务</translation>
    </message>
    <message>
        <source>The workers of {n} jobs paused them when the window was gone</source>
        <translation>窗口消失后，工作进程暂停了 {n} 个任务</translation>
    </message>
    <message>
        <source>{n} still held by a worker of the closed window: it pauses at its next step</source>
        <translation>{n} 个仍由已关闭窗口的工作进程持有：它会在下一步暂停</translation>
    </message>
</context>
<context>
    <name>Reveal</name>
    <message>
        <source>Could not open the folder {path}</source>
        <translation>无法打开文件夹 {path}</translation>
    </message>
</context>
<context>
    <name>SettingsDialog</name>
    <message>
        <source>Resume paused jobs when Easel starts</source>
        <translation>Easel 启动时继续已暂停的任务</translation>
    </message>
    <message>
        <source>Jobs paused by quitting continue by themselves at the next launch</source>
        <translation>因退出而暂停的任务会在下次启动时自动继续</translation>
    </message>
    <message>
        <source>Settings</source>
        <translation>设置</translation>
    </message>
    <message>
        <source> s</source>
        <translation> 秒</translation>
    </message>
    <message>
        <source>off</source>
        <translation>关闭</translation>
    </message>
    <message>
        <source>A running job saves its progress this often, so a crash costs at most this</source>
        <translation>运行中的任务按此间隔保存进度，崩溃最多损失这么久的进度</translation>
    </message>
    <message>
        <source>Low graphics memory (slower: model offload, tiling)</source>
        <translation>低显存模式（较慢：模型卸载、分块解码）</translation>
    </message>
    <message>
        <source> days</source>
        <translation> 天</translation>
    </message>
    <message>
        <source>forever</source>
        <translation>永久</translation>
    </message>
    <message>
        <source>no limit</source>
        <translation>不限</translation>
    </message>
    <message>
        <source>Also delete their images</source>
        <translation>同时删除其图像</translation>
    </message>
    <message>
        <source>Easel removes older finished jobs by itself, at launch and every hour; starred, paused and unfinished jobs are always kept</source>
        <translation>Easel 会在启动时和每小时自动删除较旧的已完成任务；已加星标、已暂停和未完成的任务始终保留</translation>
    </message>
    <message>
        <source>While the window is open, other programs (A1111 clients too) can queue jobs at http://127.0.0.1:&lt;port&gt;; from the next start of Easel</source>
        <translation>窗口打开时，其他程序（包括 A1111 客户端）可以在 http://127.0.0.1:&lt;端口&gt; 排队任务；下次启动 Easel 时生效</translation>
    </message>
    <message>
        <source>Models folder</source>
        <translation>模型文件夹</translation>
    </message>
    <message>
        <source>Output folder</source>
        <translation>输出文件夹</translation>
    </message>
    <message>
        <source>Workers</source>
        <translation>工作进程数</translation>
    </message>
    <message>
        <source>API token</source>
        <translation>API 令牌</translation>
    </message>
    <message>
        <source>API host names</source>
        <translation>API 主机名</translation>
    </message>
    <message>
        <source>Max attempts</source>
        <translation>最多尝试次数</translation>
    </message>
    <message>
        <source>Heartbeat timeout</source>
        <translation>心跳超时</translation>
    </message>
    <message>
        <source>Save progress every</source>
        <translation>进度保存间隔</translation>
    </message>
    <message>
        <source>Keep finished jobs for</source>
        <translation>已完成任务保留</translation>
    </message>
    <message>
        <source>Keep at most</source>
        <translation>最多保留</translation>
    </message>
    <message>
        <source>HTTP API port</source>
        <translation>HTTP API 端口</translation>
    </message>
    <message>
        <source>Language</source>
        <translation>语言</translation>
    </message>
    <message>
        <source>Advanced ▸</source>
        <translation>高级 ▸</translation>
    </message>
    <message>
        <source>Workers, timeouts, the shared queue and the language take effect the next time Easel starts.</source>
        <translation>工作进程数、超时、共享队列和语言将在下次启动 Easel 时生效。</translation>
    </message>
    <message>
        <source>Not saved: {error}</source>
        <translation>未保存：{error}</translation>
    </message>
    <message>
        <source>Advanced ▾</source>
        <translation>高级 ▾</translation>
    </message>
    <message>
        <source>System</source>
        <translation>跟随系统</translation>
    </message>
</context>
<context>
    <name>SharedQueueSection</name>
    <message>
        <source>Shared queue</source>
        <translation>共享队列</translation>
    </message>
    <message>
        <source>none: jobs stay on this computer</source>
        <translation>无：任务只在这台电脑上</translation>
    </message>
    <message>
        <source>A PostgreSQL database that several computers take jobs from, e.g. postgresql://easel@studio-server/easel?sslmode=require</source>
        <translation>多台电脑从中领取任务的 PostgreSQL 数据库，例如 postgresql://easel@studio-server/easel?sslmode=require</translation>
    </message>
    <message>
        <source>Test connection</source>
        <translation>测试连接</translation>
    </message>
    <message>
        <source>Copy this computer&apos;s jobs there</source>
        <translation>把这台电脑上的任务复制过去</translation>
    </message>
    <message>
        <source>Into an empty database only: every job with its timeline, images and paused progress. The jobs here stay as they are.</source>
        <translation>只能复制到空数据库：每个任务连同其时间线、图像和暂停时保存的进度。这里的任务保持不变。</translation>
    </message>
    <message>
        <source>Easel now runs on {database}, given by --db or EASEL_DB; this setting applies when neither is given.</source>
        <translation>Easel 当前使用由 --db 或 EASEL_DB 指定的 {database}；未指定两者时才使用此设置。</translation>
    </message>
    <message>
        <source>Database</source>
        <translation>数据库</translation>
    </message>
    <message>
        <source>Password</source>
        <translation>密码</translation>
    </message>
    <message>
        <source>Jobs stay on this computer: nothing to test.</source>
        <translation>任务只在这台电脑上：无需测试。</translation>
    </message>
    <message>
        <source>Connecting…</source>
        <translation>正在连接…</translation>
    </message>
    <message>
        <source>Copying this computer&apos;s jobs…</source>
        <translation>正在复制这台电脑上的任务…</translation>
    </message>
    <message>
        <source>Connected to {where}. It holds no jobs yet: Easel sets it up when it next starts.</source>
        <translation>已连接到 {where}。其中还没有任务：Easel 下次启动时会完成设置。</translation>
    </message>
    <message>
        <source>Connected to {where}. Its jobs come from an older Easel: their tables are updated when Easel next starts.</source>
        <translation>已连接到 {where}。其中的任务来自旧版 Easel：下次启动 Easel 时会更新其数据表。</translation>
    </message>
    <message>
        <source>Connected to {where}: {jobs} jobs, {waiting} waiting or running.</source>
        <translation>已连接到 {where}：共 {jobs} 个任务，{waiting} 个在等待或运行。</translation>
    </message>
    <message>
        <source>Copied {jobs} jobs, {rows} timeline rows and {files} images and saved progress to {where}. Save, then restart Easel to work on it.</source>
        <translation>已将 {jobs} 个任务、{rows} 条时间线记录和 {files} 个图像及已保存进度复制到 {where}。请保存，然后重新启动 Easel 以使用它。</translation>
    </message>
    <message>
        <source>not needed</source>
        <translation>不需要</translation>
    </message>
    <message>
        <source>saved on this computer (leave empty to keep it)</source>
        <translation>已保存在这台电脑上（留空则保持不变）</translation>
    </message>
    <message>
        <source>none saved; type it to keep it in PostgreSQL&apos;s password file</source>
        <translation>尚未保存；输入后将保存在 PostgreSQL 的密码文件中</translation>
    </message>
</context>
<context>
    <name>Shortcuts</name>
    <message>
        <source>Anywhere</source>
        <translation>任意位置</translation>
    </message>
    <message>
        <source> or </source>
        <translation> 或 </translation>
    </message>
    <message>
        <source>Job list</source>
        <translation>任务列表</translation>
    </message>
    <message>
        <source>Queue the prompt</source>
        <translation>将提示词加入队列</translation>
    </message>
    <message>
        <source>Cancel the selected jobs (queued ones can be undone)</source>
        <translation>取消所选任务（排队中的可撤销）</translation>
    </message>
    <message>
        <source>Pause or resume the selected jobs</source>
        <translation>暂停或继续所选任务</translation>
    </message>
    <message>
        <source>View the selected job&apos;s image</source>
        <translation>查看所选任务的图像</translation>
    </message>
    <message>
        <source>Actions for the selected jobs</source>
        <translation>所选任务的操作菜单</translation>
    </message>
    <message>
        <source>Step the number by one (Page Up/Down: by ten)</source>
        <translation>数值加减 1（Page Up/Down：加减 10）</translation>
    </message>
    <message>
        <source>Number fields</source>
        <translation>数字输入框</translation>
    </message>
    <message>
        <source>Run the selected queued jobs sooner</source>
        <translation>让所选排队任务更早运行</translation>
    </message>
    <message>
        <source>Run the selected queued jobs later</source>
        <translation>让所选排队任务更晚运行</translation>
    </message>
    <message>
        <source>Go to the next area: prompt, job list, timeline</source>
        <translation>切换到下一区域：提示词、任务列表、时间线</translation>
    </message>
    <message>
        <source>Settings</source>
        <translation>设置</translation>
    </message>
    <message>
        <source>This list of shortcuts</source>
        <translation>本快捷键列表</translation>
    </message>
    <message>
        <source>Quit (running jobs pause and continue next time)</source>
        <translation>退出（运行中的任务会暂停，下次继续）</translation>
    </message>
    <message>
        <source>A clip (click its picture)</source>
        <translation>视频片段（点击其画面）</translation>
    </message>
    <message>
        <source>Play or pause</source>
        <translation>播放或暂停</translation>
    </message>
    <message>
        <source>One frame back</source>
        <translation>后退一帧</translation>
    </message>
    <message>
        <source>One frame on</source>
        <translation>前进一帧</translation>
    </message>
    <message>
        <source>The first frame</source>
        <translation>第一帧</translation>
    </message>
    <message>
        <source>The last frame</source>
        <translation>最后一帧</translation>
    </message>
    <message>
        <source>Search the jobs by prompt</source>
        <translation>按提示词搜索任务</translation>
    </message>
</context>
<context>
    <name>ShortcutsDialog</name>
    <message>
        <source>Keyboard shortcuts</source>
        <translation>键盘快捷键</translation>
    </message>
</context>
<context>
    <name>SpeedSection</name>
    <message>
        <source>Off (exact)</source>
        <translation>关（精确）</translation>
    </message>
    <message>
        <source>Fast (step caching, slightly softer)</source>
        <translation>快（步骤缓存，略柔和）</translation>
    </message>
    <message>
        <source>Fastest (step caching, softer)</source>
        <translation>最快（步骤缓存，较柔和）</translation>
    </message>
    <message>
        <source>Skip the model&apos;s work on steps that change little (First Block Cache): about twice as fast at a small cost in detail. {families} models only</source>
        <translation>在变化很小的步骤上跳过模型的计算（First Block Cache）：速度约快一倍，细节略有损失。仅限 {families} 模型</translation>
    </message>
    <message>
        <source>Advanced ▸</source>
        <translation>高级 ▸</translation>
    </message>
    <message>
        <source>the speed&apos;s own</source>
        <translation>按速度设置</translation>
    </message>
    <message>
        <source>Higher skips more steps and softens more (fast: 0.08, fastest: 0.12)</source>
        <translation>数值越高，跳过的步骤越多，画面越柔和（快：0.08，最快：0.12）</translation>
    </message>
    <message>
        <source>Compile the model</source>
        <translation>编译模型</translation>
    </message>
    <message>
        <source>Faster steps after compiling the model once per worker (that first job waits for it; kept for later starts). Falls back to running uncompiled if compiling fails</source>
        <translation>每个工作进程编译一次模型后步骤更快（第一个任务需等待编译；结果会保留供以后启动使用）。编译失败时改为不编译运行</translation>
    </message>
    <message>
        <source>PyTorch SDPA; FlashAttention on NVIDIA GPUs where installed (each worker chooses)</source>
        <translation>PyTorch SDPA；在已安装 FlashAttention 的 NVIDIA GPU 上使用它（由各工作进程选择）</translation>
    </message>
    <message>
        <source>Cache threshold</source>
        <translation>缓存阈值</translation>
    </message>
    <message>
        <source>Attention</source>
        <translation>注意力</translation>
    </message>
    <message>
        <source>Speed</source>
        <translation>速度</translation>
    </message>
    <message>
        <source>Advanced ▾</source>
        <translation>高级 ▾</translation>
    </message>
</context>
<context>
    <name>StatsDialog</name>
    <message>
        <source>Statistics</source>
        <translation>统计</translation>
    </message>
    <message>
        <source>Jobs per status</source>
        <translation>各状态的任务数</translation>
    </message>
    <message>
        <source>Last 24 hours</source>
        <translation>最近 24 小时</translation>
    </message>
    <message>
        <source>Last 7 days</source>
        <translation>最近 7 天</translation>
    </message>
    <message>
        <source>Last 30 days</source>
        <translation>最近 30 天</translation>
    </message>
    <message>
        <source>All time</source>
        <translation>全部时间</translation>
    </message>
    <message>
        <source>nothing in this period</source>
        <translation>此期间没有数据</translation>
    </message>
    <message>
        <source>Images an hour of work: per hour in which at least one of these jobs was running (the union of their running stretches), not per hour of the period</source>
        <translation>每工作小时的图像数：按至少有一个任务在运行的时间（各任务运行时段的并集）计算，而不是按整个时间段</translation>
    </message>
    <message>
        <source>Run time, median (p95) per model and size</source>
        <translation>运行时间：按模型和尺寸的中位数（p95）</translation>
    </message>
    <message>
        <source>Wait before running, median (p95)</source>
        <translation>开始前的等待：中位数（p95）</translation>
    </message>
    <message>
        <source>Endings that were not a success, per 100 jobs</source>
        <translation>未成功结束的次数（每 100 个任务）</translation>
    </message>
    <message>
        <source>Period</source>
        <translation>时间段</translation>
    </message>
    <message>
        <source>Close</source>
        <translation>关闭</translation>
    </message>
    <message>
        <source>Reading the history…</source>
        <translation>正在读取历史…</translation>
    </message>
    <message>
        <source>{jobs} jobs · {rate} images an hour of work ({working} working) · paused {paused} in all · {saved} steps saved by resuming</source>
        <translation>{jobs} 个任务 · 每工作小时 {rate} 张图像（工作 {working}）· 共暂停 {paused} · 继续生成节省了 {saved} 步</translation>
    </message>
</context>
<context>
    <name>Status</name>
    <message>
        <source>Gave up</source>
        <translation>已放弃</translation>
    </message>
    <message>
        <source>Blocked</source>
        <translation>等待前置</translation>
    </message>
    <message>
        <source>Pending</source>
        <translation>排队中</translation>
    </message>
    <message>
        <source>Processing</source>
        <translation>生成中</translation>
    </message>
    <message>
        <source>Cancelling</source>
        <translation>取消中</translation>
    </message>
    <message>
        <source>Pausing</source>
        <translation>暂停中</translation>
    </message>
    <message>
        <source>Paused</source>
        <translation>已暂停</translation>
    </message>
    <message>
        <source>Success</source>
        <translation>已完成</translation>
    </message>
    <message>
        <source>Failed</source>
        <translation>失败</translation>
    </message>
    <message>
        <source>Timeout</source>
        <translation>超时</translation>
    </message>
    <message>
        <source>Cancelled</source>
        <translation>已取消</translation>
    </message>
    <message>
        <source>Being cancelled</source>
        <translation>正在取消</translation>
    </message>
</context>
<context>
    <name>Timeline</name>
    <message>
        <source>Time</source>
        <translation>时间</translation>
    </message>
    <message>
        <source>What happened</source>
        <translation>经过</translation>
    </message>
    <message>
        <source>After</source>
        <translation>间隔</translation>
    </message>
    <message>
        <source>Attempt {n}</source>
        <translation>第 {n} 次尝试</translation>
    </message>
    <message>
        <source>1 change</source>
        <translation>1 次变化</translation>
    </message>
    <message>
        <source>{n} changes</source>
        <translation>{n} 次变化</translation>
    </message>
    <message>
        <source>by you</source>
        <translation>由你</translation>
    </message>
    <message>
        <source>from the command line</source>
        <translation>通过命令行</translation>
    </message>
    <message>
        <source>because Easel was closing</source>
        <translation>在 Easel 关闭时</translation>
    </message>
    <message>
        <source>by Easel</source>
        <translation>由 Easel</translation>
    </message>
    <message>
        <source>automatically</source>
        <translation>自动</translation>
    </message>
    <message>
        <source>by the watchdog</source>
        <translation>由看门狗</translation>
    </message>
    <message>
        <source>when Easel started</source>
        <translation>在 Easel 启动时</translation>
    </message>
    <message>
        <source>by {who}</source>
        <translation>由 {who}</translation>
    </message>
    <message>
        <source>Cancelled by you; held a few seconds in case you undo</source>
        <translation>已被你取消；保留几秒以便撤销</translation>
    </message>
    <message>
        <source>Easel&apos;s window was gone: its worker pauses after the current step</source>
        <translation>Easel 窗口已消失：工作进程将在当前步骤后暂停</translation>
    </message>
    <message>
        <source>Easel&apos;s server was gone: its worker puts the job back in the queue</source>
        <translation>Easel 服务器已消失：工作进程把任务放回队列</translation>
    </message>
    <message>
        <source>Easel&apos;s worker supervisor was gone: its worker puts the job back in the queue</source>
        <translation>Easel 工作进程管理器已消失：工作进程把任务放回队列</translation>
    </message>
    <message>
        <source>Back in the queue with its progress: any worker continues from step {step}</source>
        <translation>已带着进度回到队列：任一工作进程从第 {step} 步继续</translation>
    </message>
    <message>
        <source>Back in the queue: any worker continues it</source>
        <translation>已回到队列：任一工作进程都会继续它</translation>
    </message>
    <message>
        <source>Cancel undone by you; queued again</source>
        <translation>你撤销了取消，已重新排队</translation>
    </message>
    <message>
        <source>Pause asked {by}; the worker stops after its current step</source>
        <translation>{by}请求暂停；工作进程会在当前步骤完成后停下</translation>
    </message>
    <message>
        <source>Cancel asked {by}; the worker stops after its current step</source>
        <translation>{by}请求取消；工作进程会在当前步骤完成后停下</translation>
    </message>
    <message>
        <source>Finished: the clip is saved (continued from step {step})</source>
        <translation>完成：片段已保存（从第 {step} 步继续）</translation>
    </message>
    <message>
        <source>Finished: the image is saved (continued from step {step})</source>
        <translation>完成：图像已保存（从第 {step} 步继续）</translation>
    </message>
    <message>
        <source>Paused; it continues from here</source>
        <translation>已暂停；之后从这里继续</translation>
    </message>
    <message>
        <source>Stopped: cancelled</source>
        <translation>已停止：已取消</translation>
    </message>
    <message>
        <source>Failed: {why}</source>
        <translation>失败：{why}</translation>
    </message>
    <message>
        <source>Failed</source>
        <translation>失败</translation>
    </message>
    <message>
        <source>Trying again automatically; will continue from step {step}</source>
        <translation>正在自动重试；将从第 {step} 步继续</translation>
    </message>
    <message>
        <source>Trying again automatically</source>
        <translation>正在自动重试</translation>
    </message>
    <message>
        <source>Queued</source>
        <translation>已加入队列</translation>
    </message>
    <message>
        <source>Queued {by}</source>
        <translation>{by}加入队列</translation>
    </message>
    <message>
        <source>Queued {by}; waits for the jobs it builds on</source>
        <translation>{by}加入队列；等待所依赖的任务完成</translation>
    </message>
    <message>
        <source>The jobs it builds on are done; now queued</source>
        <translation>所依赖的任务已完成；现已排队</translation>
    </message>
    <message>
        <source>Finished: the image is saved</source>
        <translation>完成：图像已保存</translation>
    </message>
    <message>
        <source>Finished: the clip is saved</source>
        <translation>完成：片段已保存</translation>
    </message>
    <message>
        <source>Paused {by}</source>
        <translation>{by}暂停</translation>
    </message>
    <message>
        <source>Resumed {by}</source>
        <translation>{by}继续</translation>
    </message>
    <message>
        <source>Cancelled {by}</source>
        <translation>{by}取消</translation>
    </message>
    <message>
        <source>Tried again {by}</source>
        <translation>{by}重试</translation>
    </message>
    <message>
        <source>{status} {by}</source>
        <translation>{by}：{status}</translation>
    </message>
    <message>
        <source>The worker was gone when Easel started</source>
        <translation>Easel 启动时工作进程已不在</translation>
    </message>
    <message>
        <source>The worker stopped answering</source>
        <translation>工作进程停止响应</translation>
    </message>
    <message>
        <source>{why}; kept paused</source>
        <translation>{why}；保持暂停</translation>
    </message>
    <message>
        <source>{why}; the cancel stands</source>
        <translation>{why}；取消仍然有效</translation>
    </message>
    <message>
        <source>Started</source>
        <translation>已开始</translation>
    </message>
    <message>
        <source>Started on this computer</source>
        <translation>已在本机开始</translation>
    </message>
    <message>
        <source>Started on {host}</source>
        <translation>已在 {host} 上开始</translation>
    </message>
</context>
<context>
    <name>TimelinePanel</name>
    <message>
        <source>Timeline</source>
        <translation>时间线</translation>
    </message>
    <message>
        <source>Details</source>
        <translation>详情</translation>
    </message>
    <message>
        <source>Show the stored record of the selected change (or of every change)</source>
        <translation>显示所选变更（或全部变更）的存储记录</translation>
    </message>
    <message>
        <source>Timeline · job {id}</source>
        <translation>时间线 · 任务 {id}</translation>
    </message>
</context>
<context>
    <name>TokenField</name>
    <message>
        <source>made when the API first starts</source>
        <translation>在 API 首次启动时生成</translation>
    </message>
    <message>
        <source>Copy</source>
        <translation>复制</translation>
    </message>
</context>
<context>
    <name>WorkerFeed</name>
    <message>
        <source>Lost contact with the workers: {error}</source>
        <translation>与工作进程失去联系：{error}</translation>
    </message>
    <message>
        <source>Image generation waits for the job database: {error}</source>
        <translation>图像生成正在等待任务数据库：{error}</translation>
    </message>
    <message>
        <source>Image generation could not start: {error}</source>
        <translation>图像生成无法启动：{error}</translation>
    </message>
</context>
<context>
    <name>WorkerStatus</name>
    <message>
        <source>Workers: not started</source>
        <translation>工作进程：未启动</translation>
    </message>
    <message>
        <source>Workers: starting (loading the model)…</source>
        <translation>工作进程：正在启动（加载模型）…</translation>
    </message>
    <message>
        <source>Workers: restarting…</source>
        <translation>工作进程：正在重启…</translation>
    </message>
    <message>
        <source>1 worker ready</source>
        <translation>1 个工作进程就绪</translation>
    </message>
    <message>
        <source>{n} workers ready</source>
        <translation>{n} 个工作进程就绪</translation>
    </message>
    <message>
        <source>1 worker busy</source>
        <translation>1 个工作进程忙碌</translation>
    </message>
    <message>
        <source>{n} workers busy</source>
        <translation>{n} 个工作进程忙碌</translation>
    </message>
    <message>
        <source>{busy} busy, {idle} ready</source>
        <translation>{busy} 个忙碌，{idle} 个就绪</translation>
    </message>
</context>
<context>
    <name>Workers</name>
    <message>
        <source>Starting</source>
        <translation>正在启动</translation>
    </message>
    <message>
        <source>Idle</source>
        <translation>空闲</translation>
    </message>
    <message>
        <source>Busy</source>
        <translation>忙碌</translation>
    </message>
    <message>
        <source>Draining: exits after this job</source>
        <translation>收尾中：完成当前任务后退出</translation>
    </message>
    <message>
        <source>Stopping: pauses its job, then exits</source>
        <translation>停止中：暂停当前任务后退出</translation>
    </message>
    <message>
        <source>Exited</source>
        <translation>已退出</translation>
    </message>
    <message>
        <source>Lost: not heard from</source>
        <translation>失联：没有心跳</translation>
    </message>
    <message>
        <source>drain asked</source>
        <translation>已请求收尾</translation>
    </message>
    <message>
        <source>stop asked</source>
        <translation>已请求停止</translation>
    </message>
    <message>
        <source>{n} s ago</source>
        <translation>{n} 秒前</translation>
    </message>
    <message>
        <source>{n} min ago</source>
        <translation>{n} 分钟前</translation>
    </message>
    <message>
        <source>{n} h ago</source>
        <translation>{n} 小时前</translation>
    </message>
    <message>
        <source>{n} days ago</source>
        <translation>{n} 天前</translation>
    </message>
</context>
<context>
    <name>WorkersPanel</name>
    <message>
        <source>Machine</source>
        <translation>机器</translation>
    </message>
    <message>
        <source>Device</source>
        <translation>设备</translation>
    </message>
    <message>
        <source>Model loaded</source>
        <translation>已加载的模型</translation>
    </message>
    <message>
        <source>Current job</source>
        <translation>当前任务</translation>
    </message>
    <message>
        <source>Last heartbeat</source>
        <translation>上次心跳</translation>
    </message>
    <message>
        <source>Jobs done</source>
        <translation>已完成任务</translation>
    </message>
    <message>
        <source>State</source>
        <translation>状态</translation>
    </message>
    <message>
        <source>Workers</source>
        <translation>工作进程</translation>
    </message>
    <message>
        <source>Add another computer…</source>
        <translation>添加另一台电脑…</translation>
    </message>
    <message>
        <source>&amp;Drain</source>
        <translation>收尾(&amp;D)</translation>
    </message>
    <message>
        <source>Finish the job in hand, then exit</source>
        <translation>完成手头的任务，然后退出</translation>
    </message>
    <message>
        <source>&amp;Stop</source>
        <translation>停止(&amp;S)</translation>
    </message>
    <message>
        <source>Pause the job in hand (it continues later from the same step), then exit</source>
        <translation>暂停手头的任务（之后从同一步继续），然后退出</translation>
    </message>
    <message>
        <source>Close</source>
        <translation>关闭</translation>
    </message>
    <message>
        <source>Every worker of every machine on this queue.</source>
        <translation>此队列上所有机器的全部工作进程。</translation>
    </message>
    <message>
        <source>No worker has started yet.</source>
        <translation>还没有工作进程启动。</translation>
    </message>
</context>
<context>
    <name>_FolderField</name>
    <message>
        <source>Browse…</source>
        <translation>浏览…</translation>
    </message>
    <message>
        <source>Choose a folder</source>
        <translation>选择文件夹</translation>
    </message>
</context>
</TS>
